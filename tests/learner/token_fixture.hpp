// A token trainer small enough for a unit test to train in seconds.
#pragma once

#include <random>
#include <vector>

#include "learner/token_trainer.hpp"
#include "policy/token_sampler.hpp"

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

// Rows [from, from + n) of a generation, as a generation of their own.
inline Generation slice_rows(const Generation& g, std::int64_t from, std::int64_t n) {
  Generation r = g;
  r.tokens = g.tokens.narrow(0, from, n);
  r.valid = g.valid.narrow(0, from, n);
  r.generated = g.generated.narrow(0, from, n);
  r.log_probs = g.log_probs.narrow(0, from, n);
  r.versions = g.versions.narrow(0, from, n);
  r.routes = g.routes.narrow(1, from, n);
  r.lengths.assign(g.lengths.begin() + from, g.lengths.begin() + from + n);
  r.ended.assign(g.ended.begin() + from, g.ended.begin() + from + n);
  return r;
}

inline std::vector<torch::Tensor> parameters_of(TokenTrainer& t) {
  std::vector<torch::Tensor> out;
  for (const auto& p : t.model()->parameters()) out.push_back(p.detach().clone());
  return out;
}

// `prompts` sampled by `trainer`'s policy at version 0 (`new_tokens` each,
// seeded), with `rewards` in groups of `group_size`.
inline TokenBatch sampled_batch(TokenTrainer& trainer, const std::vector<std::vector<std::int64_t>>& prompts,
                         std::vector<float> rewards, std::int64_t group_size, std::int64_t new_tokens,
                         std::uint64_t seed) {
  SampleOptions s;
  s.max_new_tokens = new_tokens;
  std::mt19937_64 rng(seed);
  TokenBatch batch;
  batch.group_size = group_size;
  batch.sequences = generate(trainer.model(), prompts, s, rng, [](std::int64_t) { return 0u; });
  batch.rewards = std::move(rewards);
  return batch;
}

// The probability `trainer`'s policy gives `token` right after `prompt`.
inline double next_token_probability(TokenTrainer& trainer, const std::vector<std::int64_t>& prompt, std::int64_t token) {
  torch::NoGradGuard g;
  const auto n = static_cast<std::int64_t>(prompt.size());
  auto out = trainer.model()->forward(torch::tensor(prompt, torch::kLong).unsqueeze(0), torch::ones({1, n}, torch::kBool));
  return torch::softmax(out.logits[0][n - 1], -1)[token].item<double>();
}

// `rows` samples of `prompt` by `trainer`'s current policy, two new tokens
// each (1 ends a row early), labelled with its version.
inline Generation sample_rows(TokenTrainer& trainer, const std::vector<std::int64_t>& prompt, std::int64_t rows,
                              std::mt19937_64& rng) {
  SampleOptions s;
  s.max_new_tokens = 2;
  s.eos = 1;
  return generate(trainer.model(), std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(rows), prompt), s, rng,
                  [&](std::int64_t) { return trainer.version(); });
}

// The largest change of any parameter element between two snapshots.
inline double largest_change(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, (a[i] - b[i]).abs().max().item<double>());
  return m;
}

}  // namespace rlx::test
