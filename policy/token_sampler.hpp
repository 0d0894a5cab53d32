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
#include <memory>
#include <random>
#include <vector>

#include <torch/torch.h>

#include "policy/moe_transformer.hpp"
#include "policy/token_rule.hpp"

namespace rlx {

struct SampleOptions {
  std::int64_t max_new_tokens = 64;
  double temperature = 1.0;
  double top_p = 1.0;         // 1: the whole distribution
  bool greedy = false;        // argmax (evaluation)
  std::int64_t eos = 1;       // ends a row (kept as its last generated token)
  std::int64_t pad = 0;       // fills rows after their end and before their prompt
  bool use_cache = true;      // false: the whole prefix again every step (the benchmark's baseline)
  bool end_at_eos = true;     // false: eos is a token like any other; the caller ends rows (end_row)
  // A decoding rule (token_rule.hpp): tokens it blocks are never sampled, and
  // every log-probability recorded is under the distribution it leaves. Null: none.
  std::shared_ptr<const TokenRule> rule;
};

// B sequences laid out for the learner: [B, W] with W = P + T, prompts
// left-padded to P, completions after them (padded after each row's end).
// A completion may hold observations (Decoder::observe): real tokens the
// caller wrote, valid but not generated.
struct Generation {
  std::int64_t prompt_width = 0;        // P
  torch::Tensor tokens;                 // [B, W] int64
  torch::Tensor valid;                  // [B, W] bool: real tokens (prompt or generated)
  torch::Tensor generated;              // [B, W] bool: sampled tokens (eos included)
  torch::Tensor log_probs;              // [B, W] float: behaviour log-prob of sampled tokens, else 0
  torch::Tensor versions;               // [B, W] int64: version that sampled each token, else 0
  torch::Tensor routes;                 // [layers, B, W, k] int64 (-1 on padding)
  std::vector<std::int64_t> lengths;    // [B] generated tokens per row
  std::vector<bool> ended;              // [B] the row emitted eos or was ended (else cut at max_new_tokens)
};

// Row b's generated tokens (its completion, end token included).
std::vector<std::int64_t> completion(const Generation& g, std::int64_t row);

using BeforeStep = std::function<std::uint64_t(std::int64_t step)>;

// generate() one step at a time, for a caller that does other work
// between steps (an explorer handles weight notifications there, an agent
// episode its tool calls).
//
// Multi-turn rows: between steps the caller may queue a row's next tokens.
// observe() queues an observation (a tool's output): each step places the
// row's next queued token instead of a sample, so the observation enters
// the KV cache like any token, after what came before, and nothing is run
// again from the start; it is marked valid, not generated (context, never
// an action). steer() queues tokens placed as if sampled, with their
// log-probability under the policy (a scripted agent: tests, teacher
// forcing). end_row() ends a row (its episode is over).
class Decoder {
 public:
  Decoder(MoETransformer& model, const std::vector<std::vector<std::int64_t>>& prompts, const SampleOptions& options);
  // One decoding step with the model's current weights, labelled `version`.
  // Returns true when every row has ended (then call finish()).
  bool step(std::mt19937_64& rng, std::uint64_t version);
  bool done() const { return done_; }
  std::int64_t steps() const { return t_; }
  std::int64_t rows() const { return static_cast<std::int64_t>(active_.size()); }
  bool active(std::int64_t row) const { return active_[static_cast<std::size_t>(row)]; }
  // Completion tokens a row may still take (the same for every active row).
  std::int64_t room() const { return o_.max_new_tokens - t_; }
  // The token the last step placed in `row`, and whether the policy chose it.
  std::int64_t last_token(std::int64_t row) const;
  bool last_generated(std::int64_t row) const;
  // Whether `row` has queued tokens left (observed or steered).
  bool queued(std::int64_t row) const;
  void observe(std::int64_t row, const std::vector<std::int64_t>& tokens);
  void steer(std::int64_t row, const std::vector<std::int64_t>& tokens);
  // Ends an active row: the next steps pad it; finish() reports it ended.
  void end_row(std::int64_t row);
  // The newest version among the steps so far (0: none).
  std::uint64_t newest_version() const { return newest_; }
  Generation finish();

 private:
  MoETransformer* model_;
  SampleOptions o_;
  Generation g_;
  KVCache cache_;
  std::vector<bool> active_;
  struct Queued {
    std::vector<std::int64_t> tokens;
    std::size_t next = 0;
    bool generated = false;  // steered: placed as the policy's
  };
  std::vector<Queued> queue_;  // [B]
  std::vector<std::int64_t> last_;  // [B] the token the last step placed
  std::vector<bool> last_generated_;  // [B] whether the policy chose it
  std::vector<std::unique_ptr<TokenRule::State>> rule_;  // [B] with options.rule: each row's state
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
