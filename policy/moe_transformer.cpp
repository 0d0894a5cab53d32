#include "policy/moe_transformer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "policy/lora_base.hpp"
#include "policy/low_precision.hpp"
#include "policy/rope.hpp"

namespace rlx {

namespace {

// In fp32 whatever x's dtype (as the families' own RMSNorm), then back
// to it before the weight.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto f = wide(x);
  return (f * torch::rsqrt(f.pow(2).mean(-1, true) + eps)).to(x.scalar_type()) * w;
}

// Attention's softmax in fp32 whatever the scores' dtype, back in it.
torch::Tensor attention_softmax(const torch::Tensor& scores) {
  return torch::softmax(wide(scores), -1).to(scores.scalar_type());
}

}  // namespace

MoETransformerImpl::MoETransformerImpl(const TransformerOptions& o, bool draw) : options_(o) {
  RLX_REQUIRE(o.d_model % o.heads == 0 || o.head_dim > 0, o.d_model, o.heads);
  RLX_REQUIRE(!o.copy_head || o.arch == TransformerArch::rlx, "a copy head is RLX's own layout's");
  RLX_REQUIRE(!o.copy_head || o.dtype == WeightDType::f32, "a copy head computes in fp32");
  // LoRA (either layout): the base frozen as buffers that policy/lora_base.hpp
  // binds to the process's one copy of it; adapters on the targeted maps.
  const bool frozen = o.lora_on();
  RLX_REQUIRE(!frozen || !o.lora_base.empty(), "a LoRA policy reads its base from a checkpoint");
  const auto adapter = [&](const char* target) {
    return Adapter{o.adapts(target) ? o.lora.rank : 0, frozen ? o.lora.alpha / double(o.lora.rank) : 0.0, frozen};
  };
  if (o.arch == TransformerArch::hf) {
    // Parameters in the order of the layout's first version (the weight
    // wire and saved files list them so), drawn only when `draw`.
    const auto hold = [&](const std::string& name, torch::Tensor t) {
      return frozen ? register_buffer(name, std::move(t)) : register_parameter(name, std::move(t));
    };
    embed_ = register_module("tok_emb", LinearMap(o.d_model, o.vocab, false, false, adapter("")));
    const auto H = o.heads, KV = o.kv_heads_or_heads(), hd = o.head_width();
    RLX_REQUIRE(H % KV == 0 && hd % 2 == 0, H, KV, hd);
    const auto ones = [&](std::int64_t n) { return torch::ones({n}); };
    RLX_REQUIRE(o.family == HfFamily::qwen2_moe || o.shared_expert_hidden == 0, o.shared_expert_hidden);
    const auto linear = [&](std::int64_t in, std::int64_t out, bool bias, const char* target) {
      return LinearMap(in, out, bias, draw, adapter(target));
    };
    for (std::int64_t l = 0; l < o.layers; ++l) {
      const auto n = std::to_string(l);
      in_norm_.push_back(hold("in_norm_" + n, ones(o.d_model)));
      q_.push_back(register_module("q_" + n, linear(o.d_model, H * hd, o.qkv_bias(), "q_proj")));
      k_.push_back(register_module("k_" + n, linear(o.d_model, KV * hd, o.qkv_bias(), "k_proj")));
      v_.push_back(register_module("v_" + n, linear(o.d_model, KV * hd, o.qkv_bias(), "v_proj")));
      o_.push_back(register_module("o_" + n, linear(H * hd, o.d_model, false, "o_proj")));
      if (o.qk_norm()) {
        q_norm_.push_back(hold("q_norm_" + n, ones(hd)));
        k_norm_.push_back(hold("k_norm_" + n, ones(hd)));
      }
      post_norm_.push_back(hold("post_norm_" + n, ones(o.d_model)));
      if (o.moe_layer(l)) {
        MoEOptions m{o.d_model,
                     o.expert_hidden,
                     o.d_model,
                     o.experts,
                     o.top_k,
                     false,
                     o.capacity_factor,
                     true,
                     o.norm_topk_prob,
                     o.shared_expert_hidden,
                     draw,
                     adapter("experts"),
                     frozen && !o.lora.router};
        moe_.push_back(register_module("moe_" + n, MoELayer(m)));
        mlp_.emplace_back(nullptr);
      } else {
        moe_.emplace_back(nullptr);
        const std::array<Adapter, 3> mlp{adapter("gate_proj"), adapter("up_proj"), adapter("down_proj")};
        mlp_.push_back(register_module("mlp_" + n, SwiGluMlp(o.d_model, o.mlp_hidden, draw, mlp)));
      }
    }
    final_norm_ = hold("final_norm", ones(o.d_model));
    rope_inv_ = rope_here_ = rope_inverse_frequencies(hd, o.rope_theta, o.rope_scaling);
    if (!o.tie_embeddings) head_ = register_module("lm_head", linear(o.d_model, o.vocab, false, "lm_head"));
    v_head_ = register_module("v_head", torch::nn::Linear(o.d_model, 1));  // not in a checkpoint: always drawn
    torch::NoGradGuard guard;
    if (draw) embed_->weight.normal_(0, 0.02);
    return;
  }
  tok_ = register_module("tok_emb", EmbeddingMap(o.vocab, o.d_model, frozen));
  pos_ = register_module("pos_emb", EmbeddingMap(o.max_len, o.d_model, frozen));
  for (std::int64_t l = 0; l < o.layers; ++l) {
    const auto n = std::to_string(l);
    ln1_.push_back(register_module("ln1_" + n, LayerNormMap(o.d_model, frozen)));
    qkv_.push_back(register_module("qkv_" + n, LinearMap(o.d_model, 3 * o.d_model, true, true, adapter("qkv"))));
    proj_.push_back(register_module("proj_" + n, LinearMap(o.d_model, o.d_model, true, true, adapter("o_proj"))));
    ln2_.push_back(register_module("ln2_" + n, LayerNormMap(o.d_model, frozen)));
    MoEOptions m{o.d_model, o.expert_hidden, o.d_model, o.experts, o.top_k, /*gelu=*/true, o.capacity_factor};
    m.experts_adapter = adapter("experts");
    m.router_frozen = frozen && !o.lora.router;
    moe_.push_back(register_module("moe_" + n, MoELayer(m)));
  }
  ln_f_ = register_module("ln_f", LayerNormMap(o.d_model, frozen));
  lm_head_ = register_module("lm_head", LinearMap(o.d_model, o.vocab, true, true, adapter("lm_head")));
  v_head_ = register_module("v_head", torch::nn::Linear(o.d_model, 1));
  {
    torch::NoGradGuard guard;
    tok_->weight.normal_(0, 0.02);
    pos_->weight.normal_(0, 0.02);
    for (auto& p : proj_) p->weight.mul_(1.0 / std::sqrt(2.0 * static_cast<double>(o.layers)));
  }
  // Last, parameters and random draws: the same seed without the head is
  // the same policy, and a start trained without one holds every other tensor.
  if (o.copy_head) copy_ = register_module("copy", CopyHead(o.d_model));
}

torch::Tensor positions_of(const torch::Tensor& valid) {
  auto v = valid.to(torch::kLong);
  return ((v.cumsum(1) - 1) * v).clamp_min(0);
}

TransformerOutput MoETransformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& valid,
                                              const torch::Tensor& replay_routes) {
  // fp32 master weights computing in bf16 (make_trainable_transformer;
  // the value head is always among what a learner trains).
  LowPrecision low(low_precision(), tokens.device());
  return run(tokens, valid, positions_of(valid), valid.to(torch::kBool), 0, nullptr, replay_routes);
}

bool MoETransformerImpl::low_precision() const {
  return options_.dtype == WeightDType::bf16 && v_head_->weight.scalar_type() == torch::kFloat32;
}

TransformerOutput MoETransformerImpl::forward_hidden(const torch::Tensor& tokens, const torch::Tensor& valid,
                                                     const torch::Tensor& replay_routes) {
  RLX_REQUIRE(!copy_, "a copy head mixes its logits with the context: forward, not forward_hidden");
  LowPrecision low(low_precision(), tokens.device());
  return run(tokens, valid, positions_of(valid), valid.to(torch::kBool), 0, nullptr, replay_routes, false);
}

torch::Tensor MoETransformerImpl::head(const torch::Tensor& hidden) {
  if (options_.arch != TransformerArch::hf) return lm_head_->forward(hidden);
  return options_.tie_embeddings ? torch::matmul(hidden, embed_->weight.t()) : head_->forward(hidden);
}

torch::Tensor MoETransformerImpl::head_logits(const torch::Tensor& hidden) {
  LowPrecision low(low_precision(), hidden.device());
  return wide(head(hidden));
}

std::vector<torch::Tensor> MoETransformerImpl::head_parameters() const {
  std::vector<torch::Tensor> trained;
  const auto add = [&](const torch::nn::Module& m) {
    for (const auto& p : m.parameters())
      if (p.requires_grad()) trained.push_back(p);
  };
  if (options_.arch != TransformerArch::hf) {
    add(*lm_head_);
  } else if (options_.tie_embeddings) {
    if (embed_->weight.requires_grad()) trained.push_back(embed_->weight);
  } else {
    add(*head_);
  }
  return trained;
}

KVCache MoETransformerImpl::new_cache(std::int64_t batch, std::int64_t capacity) const {
  const auto& o = options_;
  auto opts = embedding().options();
  KVCache c;
  const auto heads = o.arch == TransformerArch::hf ? o.kv_heads_or_heads() : o.heads;
  for (std::int64_t l = 0; l < o.layers; ++l) {
    c.k.push_back(torch::zeros({batch, heads, capacity, o.head_width()}, opts));
    c.v.push_back(torch::zeros({batch, heads, capacity, o.head_width()}, opts));
  }
  c.valid = torch::zeros({batch, capacity}, opts.dtype(torch::kBool));
  c.next_position = torch::zeros({batch}, opts.dtype(torch::kLong));
  c.capacity = capacity;
  if (copy_) c.copy = copy_->new_cache(batch, capacity, opts);
  return c;
}

void reset_cache_row(KVCache& cache, std::int64_t row) {
  cache.valid[row].fill_(false);
  cache.next_position[row].fill_(0);
  reset_copy_row(cache.copy, row);
}

void compact_cache(KVCache& cache) {
  torch::NoGradGuard guard;
  const auto L = cache.length;
  if (L == 0) return;
  auto valid = cache.valid.narrow(1, 0, L);
  const auto live = valid.sum(1).max().item<std::int64_t>();
  // Sorting by (valid, column) puts each row's padding first and its keys
  // after it in order; the last `live` columns keep every key.
  auto col = torch::arange(L, valid.options().dtype(torch::kLong)).unsqueeze(0);
  auto order = std::get<1>((valid.to(torch::kLong) * L + col).sort(1));
  auto idx = order.narrow(1, L - live, live).contiguous();  // [B, live]
  auto kept = valid.gather(1, idx);
  const auto B = idx.size(0);
  for (std::size_t l = 0; l < cache.k.size(); ++l) {
    const auto H = cache.k[l].size(1), dh = cache.k[l].size(3);
    auto i = idx.view({B, 1, live, 1}).expand({B, H, live, dh});
    auto k = cache.k[l].narrow(2, 0, L).gather(2, i);
    auto v = cache.v[l].narrow(2, 0, L).gather(2, i);
    cache.k[l].narrow(2, 0, live).copy_(k);
    cache.v[l].narrow(2, 0, live).copy_(v);
  }
  compact_copy_cache(cache.copy, idx, L);
  cache.valid.fill_(false);
  cache.valid.narrow(1, 0, live).copy_(kept);
  cache.length = live;
}

TransformerOutput MoETransformerImpl::step(const torch::Tensor& tokens, const torch::Tensor& valid, KVCache& cache) {
  torch::NoGradGuard guard;
  const auto S = tokens.size(1);
  RLX_REQUIRE(cache.length + S <= cache.capacity, cache.length, S, cache.capacity);
  auto v = valid.to(torch::kLong);
  auto positions = (cache.next_position.unsqueeze(1) + v.cumsum(1) - 1) * v;
  cache.valid.narrow(1, cache.length, S).copy_(valid);
  auto key_valid = cache.valid.narrow(1, 0, cache.length + S);
  auto out = run(tokens, valid, positions.clamp_min(0), key_valid, cache.length, &cache, {});
  cache.next_position += v.sum(1);
  cache.length += S;
  return out;
}

torch::Tensor MoETransformerImpl::norm(std::int64_t which, std::int64_t l, const torch::Tensor& x) {
  if (options_.arch == TransformerArch::hf) {
    const auto& w = which == 1 ? in_norm_[l] : which == 2 ? post_norm_[l] : final_norm_;
    return rms_norm(x, w, options_.rms_eps);
  }
  return which == 1 ? ln1_[l]->forward(x) : which == 2 ? ln2_[l]->forward(x) : ln_f_->forward(x);
}

torch::Tensor MoETransformerImpl::attention(std::int64_t l, const torch::Tensor& x, const torch::Tensor& positions,
                                            const torch::Tensor& allowed, std::int64_t offset, KVCache* cache) {
  const auto& o = options_;
  const auto B = x.size(0), S = x.size(1), L = offset + S, H = o.heads, dh = o.head_width();
  const bool qwen = o.arch == TransformerArch::hf;
  const auto KV = qwen ? o.kv_heads_or_heads() : H;
  auto h = norm(1, l, x);
  torch::Tensor q, k, v;  // [B, heads, S, dh]
  if (qwen) {
    q = q_[l]->forward(h).view({B, S, H, dh});
    k = k_[l]->forward(h).view({B, S, KV, dh});
    if (o.qk_norm()) {
      q = rms_norm(q, q_norm_[l], o.rms_eps);
      k = rms_norm(k, k_norm_[l], o.rms_eps);
    }
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    v = v_[l]->forward(h).view({B, S, KV, dh}).transpose(1, 2);
    // The frequencies once per model, moved to the activations' device and dtype once.
    // (In fp32 for bf16 activations: a bf16 angle is off by whole turns.)
    const auto angle_type = wide(x).scalar_type();
    if (rope_here_.device() != x.device() || rope_here_.scalar_type() != angle_type)
      rope_here_ = rope_inv_.to(x.device(), angle_type);
    q = apply_rope(q, positions, rope_here_);
    k = apply_rope(k, positions, rope_here_);
  } else {
    auto qkv = qkv_[l]->forward(h).view({B, S, 3, H, dh}).permute({2, 0, 3, 1, 4});
    q = qkv[0], k = qkv[1], v = qkv[2];
  }
  if (cache) {
    cache->k[l].narrow(2, offset, S).copy_(k);
    cache->v[l].narrow(2, offset, S).copy_(v);
    k = cache->k[l].narrow(2, 0, L);
    v = cache->v[l].narrow(2, 0, L);
  }
  if (KV != H) {  // grouped-query: query head i reads key/value head i / (H / KV)
    k = k.repeat_interleave(H / KV, 1);
    v = v.repeat_interleave(H / KV, 1);
  }
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(dh)));  // [B, H, S, L]
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  auto att = torch::matmul(attention_softmax(scores), v).permute({0, 2, 1, 3}).reshape({B, S, H * dh});
  return qwen ? o_[l]->forward(att) : proj_[l]->forward(att);
}

TransformerOutput MoETransformerImpl::run(const torch::Tensor& tokens, const torch::Tensor& valid,
                                          const torch::Tensor& positions, const torch::Tensor& key_valid,
                                          std::int64_t offset, KVCache* cache, const torch::Tensor& replay_routes,
                                          bool logits) {
  const auto& o = options_;
  const auto B = tokens.size(0), S = tokens.size(1), L = offset + S;
  const bool qwen = o.arch == TransformerArch::hf;
  RLX_REQUIRE(positions.numel() == 0 || positions.max().item<std::int64_t>() < o.max_len, o.max_len);
  auto x = qwen ? torch::embedding(embed_->weight, tokens)
                : tok_->forward(tokens) + pos_->forward(positions);  // [B, S, d]

  // Query i (absolute offset + i) sees key j when j is real and j <= offset + i;
  // a padded query sees itself (its output is never used, but stays finite).
  auto qpos = torch::arange(offset, L, tokens.options().dtype(torch::kLong)).view({S, 1});
  auto kpos = torch::arange(0, L, tokens.options().dtype(torch::kLong)).view({1, L});
  auto allowed = (key_valid.view({B, 1, 1, L}) & (kpos <= qpos).view({1, 1, S, L})) | (kpos == qpos).view({1, 1, S, L});

  auto flat_valid = valid.reshape({-1}).to(torch::kBool);
  auto real = flat_valid.nonzero().squeeze(1);  // rows of [B*S] that are tokens
  TransformerOutput out;
  std::vector<torch::Tensor> routes, fractions, lbs, zs;
  torch::Tensor no_routes, no_fraction;  // what every dense layer records, made once
  for (std::int64_t l = 0; l < o.layers; ++l) {
    x = x + attention(l, x, positions, allowed, offset, cache);
    if (!moe_[l]) {  // a dense layer: no routes, no router losses
      x = x + mlp_[l]->forward(norm(2, l, x));
      if (!no_routes.defined()) {
        no_routes = torch::full({B, S, o.top_k}, -1, tokens.options().dtype(torch::kLong));
        no_fraction = torch::zeros({o.experts}, x.options().dtype(torch::kFloat32));
      }
      routes.push_back(no_routes);
      fractions.push_back(no_fraction);
      continue;
    }
    // The MoE layer sees real tokens only (padding neither takes capacity
    // nor counts in the balance).
    auto h = norm(2, l, x).reshape({B * S, o.d_model}).index_select(0, real);
    torch::Tensor forced;
    if (replay_routes.defined()) forced = replay_routes[l].reshape({B * S, o.top_k}).index_select(0, real);
    auto m = moe_[l]->forward(h, forced);
    auto y = torch::zeros({B * S, o.d_model}, x.options()).index_copy(0, real, m.y);
    x = x + y.view({B, S, o.d_model});
    auto r = torch::full({B * S, o.top_k}, -1, tokens.options().dtype(torch::kLong));
    routes.push_back(r.index_copy(0, real, m.routes).view({B, S, o.top_k}));
    fractions.push_back(m.expert_fraction);
    lbs.push_back(m.load_balance);
    zs.push_back(m.router_z);
    out.dropped_fraction += m.dropped_fraction;
  }
  if (!lbs.empty()) out.dropped_fraction /= static_cast<double>(lbs.size());
  auto hf = norm(0, 0, x);
  if (logits) {
    out.logits = head(hf);
    if (copy_)
      out.logits =
          copy_->mix(out.logits, hf, tokens, valid, allowed.squeeze(1), offset, cache ? &cache->copy : nullptr);
    // Log-probabilities, values and the losses on them in fp32 whatever the
    // weights' dtype (the sampler's and the learner's alike).
    out.logits = wide(out.logits);
  } else {
    out.hidden = hf;
  }
  out.values = v_head_->forward(hf).squeeze(-1);
  out.values = wide(out.values);
  out.routes = torch::stack(routes);
  out.expert_fraction = torch::stack(fractions);
  const auto f32 = x.options().dtype(torch::kFloat32);
  out.load_balance = lbs.empty() ? torch::ones({}, f32) : torch::stack(lbs).mean();
  out.router_z = lbs.empty() ? torch::zeros({}, f32) : torch::stack(zs).mean();
  return out;
}

bool TransformerOptions::adapts(const std::string& target) const {
  return lora.rank > 0 && std::find(lora.targets.begin(), lora.targets.end(), target) != lora.targets.end();
}

bool TransformerOptions::moe_layer(std::int64_t l) const {
  if (arch == TransformerArch::rlx) return true;
  if (!moe_family() || experts == 0) return false;
  const bool listed = std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) != mlp_only_layers.end();
  return !listed && (l + 1) % sparse_step == 0;
}

TransformerOptions transformer_options(const PolicyConfig& p, std::int64_t vocab) {
  TransformerOptions o;
  o.vocab = vocab;
  o.d_model = p.d_model;
  o.heads = p.heads;
  o.layers = p.layers;
  o.max_len = p.max_len;
  o.experts = p.experts;
  o.top_k = p.top_k;
  o.expert_hidden = p.expert_hidden;
  o.capacity_factor = p.capacity_factor;
  o.copy_head = p.copy_head;
  o.dtype = p.dtype;
  return o;
}

namespace {

// Every parameter in the options' dtype (drawn in fp32 first: a seed is
// the same policy in either, rounded).
MoETransformer held_in_dtype(MoETransformer model) {
  if (model->options().dtype == WeightDType::bf16) model->to(torch::kBFloat16);
  return model;
}

}  // namespace

namespace {

MoETransformer lora_transformer(const TransformerOptions& options, std::uint64_t seed, bool masters) {
  auto model = make_lora_transformer(options, seed, masters);
  RLX_REQUIRE(model.ok(), model.error().message);  // checked at start (check_policy_init)
  return *model;
}

}  // namespace

MoETransformer make_seeded_transformer(const TransformerOptions& options, std::uint64_t seed) {
  if (options.lora_on()) return lora_transformer(options, seed, false);
  auto lock = seeded_init(seed);
  return held_in_dtype(MoETransformer(options));
}

MoETransformer make_unfilled_transformer(const TransformerOptions& options, std::uint64_t seed) {
  if (options.lora_on()) return lora_transformer(options, seed, false);
  auto lock = seeded_init(seed);
  MoETransformer model(options, /*draw=*/false);
  if (options.arch != TransformerArch::hf || options.dtype == WeightDType::f32) return held_in_dtype(model);
  // In bf16, fresh memory for what the checkpoint fills (nothing read or
  // converted: those values are never used), the drawn value head converted.
  torch::NoGradGuard guard;
  for (auto& p : model->named_parameters(true)) {
    auto& v = p.value();
    v.set_data(p.key().starts_with("v_head.") ? v.to(torch::kBFloat16)
                                              : torch::empty(v.sizes(), v.options().dtype(torch::kBFloat16)));
  }
  return model;
}

MoETransformer make_trainable_transformer(const TransformerOptions& options, std::uint64_t seed, bool unfilled) {
  if (options.lora_on()) return lora_transformer(options, seed, true);
  auto lock = seeded_init(seed);
  return MoETransformer(options, /*draw=*/!unfilled);
}

double route_mismatch(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& valid) {
  // Compare expert sets: sort each token's k experts, then any difference.
  auto sa = std::get<0>(a.sort(-1)), sb = std::get<0>(b.sort(-1));
  auto differs = (sa != sb).any(-1);                         // [layers, B, S]
  auto mask = valid.to(torch::kBool).unsqueeze(0).expand_as(differs);
  const auto n = mask.sum().item<std::int64_t>();
  if (n == 0) return 0.0;
  return static_cast<double>((differs & mask).sum().item<std::int64_t>()) / static_cast<double>(n);
}

}  // namespace rlx
