// The learner's compute for the token policy (policy/moe_transformer.hpp):
// supervised steps on (prompt, completion) pairs, and token-level RL steps
// (GRPO, or PPO with the value head) on sampled sequences, with the
// decoupled off-policy correction and the staleness bound applied per
// token, router replay as an option, and sequence-length-aware
// microbatches. Adam with epsilon 1e-6, the ranks' gradients summed
// (learner/model_optimizer.hpp). The learner trains it through
// TokenPolicyTrainer (learner/token_policy_trainer.hpp); `rlx sft` and the
// benches call it directly. Single-threaded; CAF-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/choices.hpp"
#include "core/error.hpp"
#include "learner/update_stats.hpp"
#include "messages/types.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/token_rule.hpp"
#include "policy/token_sampler.hpp"

namespace rlx {

class LearnerGroup;

struct TokenTrainerOptions {
  TransformerOptions model;
  Algorithm algorithm = Algorithm::grpo;  // grpo | ppo
  double lr = 3e-4;
  std::int64_t warmup_updates = 0;  // the rate rises linearly to lr over these first updates
  std::int64_t epochs = 1;          // passes over each batch (one optimizer step each)
  double clip = 0.2;
  double rho_bar = 2.0;             // truncation of the behaviour ratio
  bool decoupled = true;            // false: plain PPO on stale data (the ratio against the behaviour policy)
  double temperature = 1.0;         // the sampling temperature: log-probs are taken at it
  std::uint64_t max_lag = 4;        // per-token staleness bound (versions)
  // Padded tokens per microbatch, at most: with LoRA fewer for a large
  // vocabulary (microbatch_tokens), bounding the layers' activations.
  std::int64_t token_budget = 4096;
  std::int64_t microbatch_tokens() const;
  bool router_replay = false;       // train through the routes the rollout recorded
  double load_balance_coef = 0.01;
  double router_z_coef = 1e-3;
  double value_coef = 0.5;          // ppo
  double entropy_coef = 0.0;
  // KL(policy || reference) per trained token, the reference being the
  // run's start weights (take_reference; k3 estimator: exp(d) - d - 1,
  // d = log p_ref - log p). 0: off, and no reference is held.
  double kl_coef = 0.0;
  double max_grad_norm = 1.0;
  // Textual feedback: KL(teacher || student) on a failed row's completion,
  // the teacher being these weights with the scorer's hint in the prompt
  // (TokenBatch::teacher_prompts), the student without it (0: off).
  double hint_coef = 0.0;
  std::string tokenizer;            // [tokens] tokenizer: what hints are encoded with ("" characters)
  std::uint64_t seed = 1;
  // The decoding rule the explorers sample under ([tokens] edit_names;
  // policy/token_rule.hpp): every log-probability is taken under it, as the
  // behaviour's was, and supervised targets are scored under it. Null: none.
  std::shared_ptr<const TokenRule> rule;
  // Where the model, its optimizer and every batch's tensors live ("cpu",
  // "cuda", "cuda:N"; checked by check_device before). Batches arrive on
  // the CPU and are moved per microbatch; weights are exported to the CPU.
  std::string device = "cpu";
  // The model's weights come next, whole (a Hugging Face checkpoint the
  // caller loads, or rank 0's state): built with make_unfilled_transformer,
  // nothing drawn that would be overwritten.
  bool unfilled = false;
  // Data-parallel ranks (learner/learner_group.hpp); null when alone. Each
  // rank's loss is its share of the whole batch's (token counts and PPO's
  // advantage statistics are summed over the ranks first) and the ranks'
  // gradients are summed before each optimizer step, so N ranks with B
  // rows train as one rank with N x B would. Not owned.
  LearnerGroup* group = nullptr;
};

// Sampled sequences with their rewards: a Generation (policy/token_sampler.hpp)
// and one reward per row; rows come in groups of `group_size` samples of a task.
struct TokenBatch {
  Generation sequences;
  std::vector<float> rewards;       // [B]
  std::int64_t group_size = 1;
  // [B] or empty: a failed row's prompt with its scorer's hint in it
  // (envs/tokens hinted_prompt), what the hint distillation's teacher
  // sees; empty: no hint.
  std::vector<std::vector<std::int64_t>> teacher_prompts;
  // [B] or empty: 1 = the row got no outcome (an infrastructure failure):
  // no gradient, no hint; under GRPO its group is judged by its scored
  // rows (grpo_advantages_scored).
  std::vector<std::uint8_t> masked;
};

struct TokenUpdateStats {
  double policy_loss = 0;           // rl: the PPO surrogate; sft: cross-entropy per token
  double value_loss = 0;
  double entropy = 0;
  double load_balance = 0;
  double router_z = 0;
  double route_mismatch = 0;        // fraction of (token, layer) routed otherwise than recorded
  double dropped_fraction = 0;
  std::int64_t tokens = 0;          // tokens trained on
  std::int64_t stale_tokens = 0;    // generated tokens past the staleness bound (not trained)
  std::int64_t microbatches = 0;
  std::int64_t skipped_rows = 0;    // rows of zero advantage (GRPO), not computed
  double hint_kl = 0;               // mean KL(teacher with hint || student) per hinted token, before the step
  double reference_kl = 0;          // mean KL(policy || reference) per trained token, before the step (kl_coef > 0)
  // Mean |log p - behaviour log p| over the admitted tokens sampled at this
  // very version (lag 0), before the step: the sampler's and the learner's
  // computations of one policy apart (bf16, batch shapes); 0 without such
  // tokens. sampler_tokens: how many (summed over the ranks).
  double sampler_mismatch = 0;
  std::int64_t sampler_tokens = 0;
  std::int64_t hinted_rows = 0;     // rows distilled from their hint
  LossStats correction;
};

// How well a policy predicts the targets of supervised rows (TokenTrainer::sft_score).
struct SupervisedScore {
  double loss = 0;          // cross-entropy per target token
  double accuracy = 0;      // share of target tokens that are the policy's most likely token
  std::int64_t tokens = 0;  // target tokens
};

class TokenTrainer {
 public:
  explicit TokenTrainer(const TokenTrainerOptions& options);
  ~TokenTrainer();

  // One optimizer step of cross-entropy on each completion (then eos)
  // after its prompt. REQUIRES: prompts.size() == completions.size() > 0.
  // `observed` (empty, or one mask per completion): a multi-turn
  // transcript, whose observed tokens are context, not targets, and which
  // ends with its last turn (no eos).
  TokenUpdateStats sft_step(const std::vector<std::vector<std::int64_t>>& prompts,
                            const std::vector<std::vector<std::int64_t>>& completions,
                            const std::vector<std::vector<std::uint8_t>>& observed = {});

  // The same rows scored without a step: what a held-out set of the
  // expert's transcripts tells of copying and reading before pass@1 moves.
  SupervisedScore sft_score(const std::vector<std::vector<std::int64_t>>& prompts,
                            const std::vector<std::vector<std::int64_t>>& completions,
                            const std::vector<std::vector<std::uint8_t>>& observed = {});

  // `epochs` optimizer steps on the batch; the version then grows by 1.
  // Data-parallel: every rank calls it with its own slice of the batch;
  // the statistics returned are the whole batch's.
  TokenUpdateStats rl_step(const TokenBatch& batch);

  MoETransformer& model();
  const MoETransformer& model() const;
  std::uint64_t version() const { return version_; }
  void set_version(std::uint64_t v) { version_ = v; }
  WeightSetData weights() const;
  Result<void> load_weights(const WeightSetData& weights);
  const TokenTrainerOptions& options() const { return options_; }

  torch::Device device() const;
  // Parameters and optimizer moments (the version is the caller's).
  // Load from an archive read onto device().
  void save_state(torch::serialize::OutputArchive& archive) const;
  // An error (invalid_field) on a missing or misshapen parameter.
  Result<void> load_state(torch::serialize::InputArchive& archive);
  // The weights a run starts from (learner/start_weights.hpp: an `rlx sft
  // --out` file, hf:DIR, a learner checkpoint or a run's log_dir); returns
  // what was read.
  Result<std::string> load_model_file(const std::string& path);
  // Holds the reference kl_coef pulls toward: the seeded model of these
  // options, with `init` loaded when not empty (the run's [policy] init),
  // frozen. Every rank takes its own from the same file (the reference is
  // never trained, so it needs no all-reduce). Fails as load_model_file.
  // With `init_adapter` ("peft:DIR"), the reference is the base with those adapters.
  Result<void> take_reference(const std::string& init, const std::string& init_adapter = "");
  bool has_reference() const;

 private:
  // The rank's statistics of an rl_step (and its hint KL sum) made the batch's.
  void gather_stats(TokenUpdateStats& s, double& hint_kl_sum, double& reference_kl) const;
  // Calls `each` with each microbatch of the supervised rows (tokens,
  // valid, targets on the device), its share of the rows and the whole
  // batch's target count.
  using SupervisedMicrobatch = std::function<void(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                                  double, double)>;
  void supervised_microbatches(const std::vector<std::vector<std::int64_t>>& prompts,
                               const std::vector<std::vector<std::int64_t>>& completions,
                               const std::vector<std::vector<std::uint8_t>>& observed, const SupervisedMicrobatch& each);

  struct Impl;
  TokenTrainerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::uint64_t version_ = 0;
};

// Left-pads prompt + completion (+ eos) rows: tokens and valid [B, W],
// and the completion mask (the tokens to predict).
struct SupervisedRows {
  torch::Tensor tokens, valid, targets;
};
SupervisedRows supervised_rows(const std::vector<std::vector<std::int64_t>>& prompts,
                               const std::vector<std::vector<std::int64_t>>& completions, std::int64_t pad,
                               std::int64_t eos, const std::vector<std::vector<std::uint8_t>>& observed = {});

}  // namespace rlx
