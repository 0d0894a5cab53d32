// A transformer small enough for unit tests of decoding (20 tokens unless told).
#pragma once

#include "policy/moe_transformer.hpp"

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

}  // namespace rlx::test
