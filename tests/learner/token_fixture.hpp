// A token trainer small enough for a unit test to train in seconds.
#pragma once

#include "learner/token_trainer.hpp"

namespace rlx::test {

inline TokenTrainerOptions tiny_token_trainer(std::int64_t vocab) {
  TokenTrainerOptions o;
  o.model.vocab = vocab;
  o.model.d_model = 32;
  o.model.heads = 2;
  o.model.layers = 2;
  o.model.max_len = 32;
  o.model.experts = 4;
  o.model.top_k = 2;
  o.model.expert_hidden = 32;
  o.lr = 3e-3;
  o.seed = 11;
  return o;
}

}  // namespace rlx::test
