#include "learner/token_policy_trainer.hpp"

#include "policy/weights_wire.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/edit_names.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/token_segment.hpp"

namespace rlx {

namespace {

// Each hinted row's prompt with its hint in it (empty: no hint).
std::vector<std::vector<std::int64_t>> teacher_prompts(const Generation& g, const std::vector<std::string>& hints,
                                                       const Tokenizer& tokenizer) {
  std::vector<std::vector<std::int64_t>> out(hints.size());
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto val = g.valid.accessor<bool, 2>();
  for (std::size_t b = 0; b < hints.size(); ++b) {
    if (hints[b].empty()) continue;
    std::vector<std::int64_t> prompt;
    for (std::int64_t c = 0; c < g.prompt_width; ++c)
      if (val[static_cast<std::int64_t>(b)][c]) prompt.push_back(tok[static_cast<std::int64_t>(b)][c]);
    out[b] = hinted_prompt(prompt, hints[b], tokenizer);
  }
  return out;
}

}  // namespace

TokenTrainerOptions token_trainer_options(const TrainerOptions& o) {
  TokenTrainerOptions t;
  t.model = run_transformer_options(o.policy, run_tokenizer(o.tokens.tokenizer)->vocab());
  t.unfilled = !hf_init_dir(o.policy.init).empty();  // make_trainer loads it (rank 0) or takes rank 0's
  t.algorithm = o.learner.algorithm;
  t.lr = o.learner.lr;
  t.warmup_updates = o.learner.warmup_updates;
  t.epochs = o.learner.epochs;
  t.clip = o.learner.clip;
  t.rho_bar = o.learner.rho_bar;
  t.decoupled = o.learner.correction == Correction::decoupled;
  t.temperature = o.tokens.temperature;
  t.max_lag = o.max_staleness;
  t.router_replay = o.policy.router_replay;
  t.load_balance_coef = o.policy.load_balance_coef;
  t.router_z_coef = o.policy.router_z_coef;
  t.value_coef = o.learner.value_coef;
  t.entropy_coef = o.learner.entropy_coef;
  t.kl_coef = o.learner.kl_coef;
  t.max_grad_norm = o.learner.max_grad_norm;
  t.hint_coef = o.tokens.hint_coef;
  t.tokenizer = o.tokens.tokenizer;
  t.rule = decoding_rule(o.tokens);
  t.seed = o.seed;
  t.device = o.learner.device;
  t.group = o.group;
  return t;
}

TokenPolicyTrainer::TokenPolicyTrainer(const TokenTrainerOptions& options)
    : Trainer(options.device), tokens_(options), tokenizer_(run_tokenizer(options.tokenizer)) {}

std::string TokenPolicyTrainer::refuses(const Segment& segment) const {
  if (!segment.tokens) return "a segment without tokens for the token policy";
  // A token outside the vocabulary would fail the whole batch's update.
  for (const auto t : segment.actions)
    if (t < 0 || t >= tokens_.options().model.vocab)
      return fmt::format("token {} outside the vocabulary ({})", t, tokens_.options().model.vocab);
  return "";
}

WeightSetData TokenPolicyTrainer::weights() const {
  auto w = tokens_.weights();
  w.version = version();
  w.policy_kind = "moe_transformer";
  w.checksum = w.compute_checksum();
  return w;
}

EncodedWeightSet TokenPolicyTrainer::encoded_weights(std::uint64_t created_unix_ns) const {
  // In the policy's dtype: bf16 sets are the fp32 masters rounded as they are written.
  return encode_module_weights(*tokens_.model(), version(), "moe_transformer", created_unix_ns, "learner",
                               tokens_.options().model.dtype);
}

UpdateStats TokenPolicyTrainer::train(const std::vector<const Segment*>& segments) {
  const auto& m = tokens_.options().model;
  auto rows = token_rows(segments, m.layers, m.top_k);
  TokenBatch batch{std::move(rows.rows), std::move(rows.rewards), rows.group_size, {}, {}};
  if (std::find(rows.masked.begin(), rows.masked.end(), 1) != rows.masked.end()) batch.masked = std::move(rows.masked);
  if (tokens_.options().hint_coef > 0) batch.teacher_prompts = teacher_prompts(batch.sequences, rows.hints, *tokenizer_);
  // The version the tokens' staleness is measured against. rl_step leaves
  // it where it is when every token was stale; the learner's contract is
  // still one version per batch (Trainer::update).
  tokens_.set_version(version());
  const auto t = tokens_.rl_step(batch);
  UpdateStats s;
  s.policy_loss = t.policy_loss;
  s.value_loss = t.value_loss;
  s.entropy = t.entropy;
  s.load_balance = t.load_balance;
  s.correction = t.correction;
  s.route_mismatch = t.route_mismatch;
  s.stale_tokens = static_cast<std::uint64_t>(t.stale_tokens);
  s.hint_kl = t.hint_kl;
  s.reference_kl = t.reference_kl;
  s.sampler_mismatch = t.sampler_mismatch;
  s.hinted_rows = static_cast<std::uint64_t>(t.hinted_rows);
  s.skipped_rows = static_cast<std::uint64_t>(t.skipped_rows);
  for (const Segment* x : segments) s.steps += x->env_steps();
  return s;
}

void TokenPolicyTrainer::save(torch::serialize::OutputArchive& a) const { tokens_.save_state(a); }
Result<void> TokenPolicyTrainer::load(torch::serialize::InputArchive& a) { return tokens_.load_state(a); }

}  // namespace rlx
