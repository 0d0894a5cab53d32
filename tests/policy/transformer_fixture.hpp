// A transformer small enough for unit tests of decoding (20 tokens unless told).
#pragma once

#include <algorithm>
#include <cmath>

#include "core/config.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/token_sampler.hpp"

namespace rlx::test {

inline TransformerOptions small_transformer(std::int64_t max_len = 32, std::int64_t vocab = 20) {
  TransformerOptions o;
  o.vocab = vocab;
  o.d_model = 16;
  o.heads = 2;
  o.layers = 2;
  o.max_len = max_len;
  o.experts = 4;
  o.top_k = 2;
  o.expert_hidden = 24;
  return o;
}

// A Hugging Face-layout policy of `family` small enough for unit tests:
// 2 layers of grouped-query attention (4 heads over 2), 4 experts top-2,
// or a dense SwiGLU MLP for llama (with its rope scaling).
inline TransformerOptions hf_small(HfFamily family) {
  TransformerOptions o;
  o.arch = TransformerArch::hf;
  o.family = family;
  o.vocab = 40;
  o.d_model = 32;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 8;
  o.layers = 2;
  o.max_len = 48;
  o.rope_theta = 10000;
  if (family == HfFamily::llama) {
    o.experts = o.top_k = o.expert_hidden = 0;
    o.mlp_hidden = 40;
    o.rope_scaling = RopeScaling{8, 1, 4, 32};
  } else {
    o.experts = 4;
    o.top_k = 2;
    o.expert_hidden = 24;
  }
  return o;
}

// A [policy] section for the smallest transformer an explorer builds
// (one layer, two experts, top-1): for tests that drive a TokenRollout.
inline PolicyConfig tiny_policy(std::int64_t max_len) {
  PolicyConfig p;
  p.kind = PolicyKind::moe_transformer;
  p.d_model = 16;
  p.heads = 2;
  p.layers = 1;
  p.experts = 2;
  p.top_k = 1;
  p.expert_hidden = 16;
  p.max_len = max_len;
  return p;
}

// The largest gap between a sampled token's log-probability as decoding
// recorded it and as one pass over the whole sequences gives (`logits`:
// that pass's, [B, W, vocab]).
inline double worst_log_prob_gap(const Generation& g, const torch::Tensor& logits) {
  auto logp = torch::log_softmax(logits, -1);
  auto gen = g.generated.accessor<bool, 2>();
  auto lp = g.log_probs.accessor<float, 2>();
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  double worst = 0;
  for (std::int64_t b = 0; b < g.tokens.size(0); ++b)
    for (std::int64_t c = g.prompt_width; c < g.tokens.size(1); ++c)
      if (gen[b][c]) worst = std::max(worst, static_cast<double>(std::abs(logp[b][c - 1][tok[b][c]].item<float>() - lp[b][c])));
  return worst;
}

}  // namespace rlx::test
