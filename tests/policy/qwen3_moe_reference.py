#!/usr/bin/env python3
"""A reference forward of the Qwen3-MoE and Qwen2-MoE families, in plain
Python (floats, no libraries), written from the public model definitions
(Hugging Face transformers' modeling_qwen3_moe.py: Qwen3MoeForCausalLM;
modeling_qwen2_moe.py: Qwen2MoeForCausalLM, whose q, k and v projections
have biases, whose heads' q and k are not normalised, and whose MoE block
adds a shared expert scaled by sigmoid(shared_expert_gate(x))), for
tests/policy/hf_checkpoint_test.cpp. It shares no code with RLX: it reads
config.json and model.safetensors itself.

  qwen3_moe_reference.py DIR TOKENS.json  ->  JSON: one list of logits rows per sequence

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


def rope(x, pos, theta):  # one head's vector, the rotate-half form
    d = len(x)
    half = d // 2
    out = list(x)
    for i in range(half):
        inv = 1.0 / (theta ** ((2 * i) / d))
        a = pos * inv
        c, s = math.cos(a), math.sin(a)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


def forward(cfg, W, ids):
    qwen2 = cfg["model_type"] == "qwen2_moe"
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"]
    hd = d // H if qwen2 else cfg["head_dim"]
    ident = lambda x, w, e: x  # noqa: E731  (Qwen2: no q/k norms)
    qk_norm = ident if qwen2 else rms
    E, k, eps = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["rms_norm_eps"]
    theta = cfg["rope_theta"]
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
            if qwen2:
                s = mlp(W, p + "mlp.shared_expert.", h)
                g = 1.0 / (1.0 + math.exp(-matvec(W[p + "mlp.shared_expert_gate.weight"], h)[0]))
                y = [yy + g * ss for yy, ss in zip(y, s)]
            xs[t] = [a + b for a, b in zip(xs[t], y)]
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return [matvec(head, rms(x, W["model.norm.weight"], eps)) for x in xs]


def main():
    folder, tokens = sys.argv[1], sys.argv[2]
    cfg = json.load(open(folder + "/config.json"))
    assert cfg["model_type"] in ("qwen3_moe", "qwen2_moe"), cfg["model_type"]
    W = read_safetensors(folder + "/model.safetensors")
    rows = json.load(open(tokens))
    json.dump([forward(cfg, W, ids) for ids in rows], sys.stdout)


if __name__ == "__main__":
    main()
