#!/usr/bin/env python3
"""A reference forward of the Hugging Face decoder families RLX reads, in
plain Python (floats, no libraries), written from the public model
definitions in Hugging Face transformers:
  modeling_qwen3_moe.py  Qwen3MoeForCausalLM: RMSNorm on each head's q and k,
                         a sparse MoE block in layer i unless i is in
                         mlp_only_layers or (i + 1) % decoder_sparse_step != 0,
                         where a dense MLP of intermediate_size stands
  modeling_qwen2_moe.py  Qwen2MoeForCausalLM: biases on q, k and v, no q/k
                         norms, a shared expert scaled by
                         sigmoid(shared_expert_gate(x)); the same layer rule
  modeling_qwen3.py      Qwen3ForCausalLM: Qwen3's attention, dense MLPs
  modeling_qwen2.py      Qwen2ForCausalLM: Qwen2's attention, dense MLPs
  modeling_llama.py      LlamaForCausalLM: no biases, no q/k norms, dense;
                         modeling_rope_utils.py's "llama3" rope scaling
for tests/policy/hf_checkpoint_test.cpp. It shares no code with RLX: it
reads config.json and model.safetensors itself.

  hf_reference.py DIR TOKENS.json  ->  JSON: one list of logits rows per sequence

Each sequence is run alone, without padding, positions 0..T-1.
"""
import json
import math
import struct
import sys


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", t["dtype"]
        b, e = t["data_offsets"]
        flat = list(struct.unpack("<%df" % ((e - b) // 4), body[b:e]))
        shape = t["shape"]
        if len(shape) == 1:
            out[name] = flat
        else:
            rows, cols = shape
            out[name] = [flat[r * cols : (r + 1) * cols] for r in range(rows)]
    return out


def matvec(w, x, bias=None):  # w: [out][in] (a Linear's weight), x: [in]
    y = [sum(a * b for a, b in zip(row, x)) for row in w]
    return y if bias is None else [v + b for v, b in zip(y, bias)]


def mlp(W, q, h):  # a SwiGLU MLP whose weights are named q + "gate_proj.weight", ...
    a = matvec(W[q + "gate_proj.weight"], h)
    b = matvec(W[q + "up_proj.weight"], h)
    return matvec(W[q + "down_proj.weight"], [silu(u) * v for u, v in zip(a, b)])


def rms(x, w, eps):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * s * g for v, g in zip(x, w)]


def softmax(xs):
    m = max(xs)
    e = [math.exp(v - m) for v in xs]
    z = sum(e)
    return [v / z for v in e]


def inverse_frequencies(cfg, d):  # modeling_rope_utils: default and llama3
    inv = [1.0 / (cfg.get("rope_theta", 10000.0) ** ((2 * i) / d)) for i in range(d // 2)]
    s = cfg.get("rope_scaling")
    if not s:
        return inv
    assert s.get("rope_type", s.get("type")) == "llama3", s
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for f in inv:
        wavelen = 2 * math.pi / f
        scaled = f / factor if wavelen > low_wavelen else f
        if high_wavelen <= wavelen <= low_wavelen:
            smooth = (old / wavelen - low) / (high - low)
            scaled = (1 - smooth) * scaled / factor + smooth * scaled
        out.append(scaled)
    return out


def rope(x, pos, inv):  # one head's vector, the rotate-half form
    d = len(x)
    half = d // 2
    out = list(x)
    for i in range(half):
        a = pos * inv[i]
        c, s = math.cos(a), math.sin(a)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def sparse(cfg, layer):  # the MoE families' rule for a sparse layer
    if cfg["model_type"] not in ("qwen3_moe", "qwen2_moe"):
        return False
    only = cfg.get("mlp_only_layers") or []
    return layer not in only and cfg["num_experts"] > 0 and (layer + 1) % cfg.get("decoder_sparse_step", 1) == 0


def forward(cfg, W, ids):
    qwen2 = cfg["model_type"] in ("qwen2_moe", "qwen2")
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"]
    hd = d // H if qwen2 else cfg.get("head_dim", d // H)
    ident = lambda x, w, e: x  # noqa: E731  (Qwen2, Llama: no q/k norms)
    qk_norm = rms if cfg["model_type"] in ("qwen3_moe", "qwen3") else ident
    eps = cfg["rms_norm_eps"]
    theta = inverse_frequencies(cfg, hd)
    xs = [list(W["model.embed_tokens.weight"][t]) for t in ids]
    T = len(ids)
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        hs = [rms(x, W[p + "input_layernorm.weight"], eps) for x in xs]
        qs, ks, vs = [], [], []
        for pos, h in enumerate(hs):
            q = matvec(W[p + "self_attn.q_proj.weight"], h, W.get(p + "self_attn.q_proj.bias"))
            kk = matvec(W[p + "self_attn.k_proj.weight"], h, W.get(p + "self_attn.k_proj.bias"))
            v = matvec(W[p + "self_attn.v_proj.weight"], h, W.get(p + "self_attn.v_proj.bias"))
            qn, kn = W.get(p + "self_attn.q_norm.weight"), W.get(p + "self_attn.k_norm.weight")
            qs.append([rope(qk_norm(q[i * hd : (i + 1) * hd], qn, eps), pos, theta) for i in range(H)])
            ks.append([rope(qk_norm(kk[i * hd : (i + 1) * hd], kn, eps), pos, theta) for i in range(KV)])
            vs.append([v[i * hd : (i + 1) * hd] for i in range(KV)])
        for t in range(T):
            att = []
            for i in range(H):
                g = i // (H // KV)  # repeat_kv
                scores = [sum(a * b for a, b in zip(qs[t][i], ks[j][g])) / math.sqrt(hd) for j in range(t + 1)]
                w = softmax(scores)
                att += [sum(w[j] * vs[j][g][c] for j in range(t + 1)) for c in range(hd)]
            o = matvec(W[p + "self_attn.o_proj.weight"], att)
            xs[t] = [a + b for a, b in zip(xs[t], o)]
        for t in range(T):
            h = rms(xs[t], W[p + "post_attention_layernorm.weight"], eps)
            if not sparse(cfg, layer):
                xs[t] = [a + b for a, b in zip(xs[t], mlp(W, p + "mlp.", h))]
                continue
            E, k = cfg["num_experts"], cfg["num_experts_per_tok"]
            probs = softmax(matvec(W[p + "mlp.gate.weight"], h))
            top = sorted(range(E), key=lambda e: -probs[e])[:k]
            gates = [probs[e] for e in top]
            if cfg["norm_topk_prob"]:
                z = sum(gates)
                gates = [g / z for g in gates]
            y = [0.0] * d
            for e, g in zip(top, gates):
                m = mlp(W, p + "mlp.experts.%d." % e, h)
                y = [yy + g * mm for yy, mm in zip(y, m)]
            if cfg["model_type"] == "qwen2_moe":
                s = mlp(W, p + "mlp.shared_expert.", h)
                g = 1.0 / (1.0 + math.exp(-matvec(W[p + "mlp.shared_expert_gate.weight"], h)[0]))
                y = [yy + g * ss for yy, ss in zip(y, s)]
            xs[t] = [a + b for a, b in zip(xs[t], y)]
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return [matvec(head, rms(x, W["model.norm.weight"], eps)) for x in xs]


def main():
    folder, tokens = sys.argv[1], sys.argv[2]
    cfg = json.load(open(folder + "/config.json"))
    assert cfg["model_type"] in ("qwen3_moe", "qwen2_moe", "qwen3", "qwen2", "llama"), cfg["model_type"]
    W = read_safetensors(folder + "/model.safetensors")
    rows = json.load(open(tokens))
    json.dump([forward(cfg, W, ids) for ids in rows], sys.stdout)


if __name__ == "__main__":
    main()
