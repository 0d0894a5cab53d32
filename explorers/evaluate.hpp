// Scores a weight set: one episode in each of N environments, actions by
// the policy (greedy argmax, or sampled), no learning. Used to judge a
// policy trained offline from a log, and by tests.
#pragma once

#include "core/config.hpp"
#include "core/error.hpp"
#include "envs/batch_env.hpp"
#include "messages/types.hpp"

namespace rlx {

struct EvaluateOptions {
  PolicyConfig policy;
  std::int64_t obs_dim = 4;
  std::int64_t num_actions = 2;
  int episodes = 32;           // one per environment, all run together
  std::uint64_t seed = 12345;  // env seed (use one the training never saw)
  bool greedy = true;
  std::uint64_t max_steps = 100'000;  // a bound for environments without a time limit
};

struct Evaluation {
  double mean_return = 0;
  double min_return = 0, max_return = 0;
  int episodes = 0;
};

Result<Evaluation> evaluate(const WeightSetData& weights, const BatchEnvFactory& envs, const EvaluateOptions& options);

}  // namespace rlx
