// Batched incremental sampling from the MoE transformer: every row's
// prompt is prefilled at once (left-padded), then one token per row per
// step through the KV cache, until every row has emitted `eos` or
// `max_new_tokens`. Temperature and top-p (nucleus) sampling, or greedy;
// a caller-owned RNG, so an explorer's samples follow from its seed.
//
// Records what the learner needs per generated token: its log-probability
// under the sampling distribution before the top-p cut (softmax of
// logits / temperature: the learner scores tokens at the same
// temperature), the experts every layer chose for it, and the policy
// version that produced it: `before_step` runs before every decoding step
// and may swap the weights (a new version mid-sequence) and returns the
// version in use.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "policy/moe_transformer.hpp"

namespace rlx {

struct SampleOptions {
  std::int64_t max_new_tokens = 64;
  double temperature = 1.0;
  double top_p = 1.0;         // 1: the whole distribution
  bool greedy = false;        // argmax (evaluation)
  std::int64_t eos = 1;       // ends a row (kept as its last generated token)
  std::int64_t pad = 0;       // fills rows after their end and before their prompt
  bool use_cache = true;      // false: the whole prefix again every step (the benchmark's baseline)
};

// B sequences laid out for the learner: [B, W] with W = P + T, prompts
// left-padded to P, completions after them (padded after each row's end).
struct Generation {
  std::int64_t prompt_width = 0;        // P
  torch::Tensor tokens;                 // [B, W] int64
  torch::Tensor valid;                  // [B, W] bool: real tokens (prompt or generated)
  torch::Tensor generated;              // [B, W] bool: sampled tokens (eos included)
  torch::Tensor log_probs;              // [B, W] float: behaviour log-prob of sampled tokens, else 0
  torch::Tensor versions;               // [B, W] int64: version that sampled each token, else 0
  torch::Tensor routes;                 // [layers, B, W, k] int64 (-1 on padding)
  std::vector<std::int64_t> lengths;    // [B] generated tokens per row
  std::vector<bool> ended;              // [B] the row emitted eos (else cut at max_new_tokens)
};

// Row b's generated tokens (its completion, end token included).
std::vector<std::int64_t> completion(const Generation& g, std::int64_t row);

using BeforeStep = std::function<std::uint64_t(std::int64_t step)>;

// generate() one step at a time, for a caller that does other work
// between steps (an explorer handles weight notifications there).
class Decoder {
 public:
  Decoder(MoETransformer& model, const std::vector<std::vector<std::int64_t>>& prompts, const SampleOptions& options);
  // One decoding step with the model's current weights, labelled `version`.
  // Returns true when every row has ended (then call finish()).
  bool step(std::mt19937_64& rng, std::uint64_t version);
  bool done() const { return done_; }
  std::int64_t steps() const { return t_; }
  // The newest version among the steps so far (0: none).
  std::uint64_t newest_version() const { return newest_; }
  Generation finish();

 private:
  MoETransformer* model_;
  SampleOptions o_;
  Generation g_;
  KVCache cache_;
  std::vector<bool> active_;
  std::int64_t t_ = 0;
  std::uint64_t newest_ = 0;
  bool done_ = false;
};

Generation generate(MoETransformer& model, const std::vector<std::vector<std::int64_t>>& prompts,
                    const SampleOptions& options, std::mt19937_64& rng, const BeforeStep& before_step = {});

// One token per row from logits [B, V] (temperature, top-p or greedy):
// the tokens and their log-probabilities at that temperature.
std::pair<std::vector<std::int64_t>, std::vector<float>> sample_tokens(const torch::Tensor& logits,
                                                                       const SampleOptions& options,
                                                                       std::mt19937_64& rng);

}  // namespace rlx
