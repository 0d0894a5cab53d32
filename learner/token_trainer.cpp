#include "learner/token_trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "learner/head_log_probs.hpp"
#include "learner/learner_group.hpp"
#include "learner/lr_schedule.hpp"
#include "learner/model_optimizer.hpp"
#include "learner/start_weights.hpp"
#include "learner/token_hints.hpp"
#include "learner/token_losses.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/peft_adapter.hpp"
#include "policy/rule_masks.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

// The rule's blocked tokens for rows (best on the CPU: the rule walks
// them there), moved to `device` (empty: no rule, or nothing blocked).
BlockedTokens blocked_for(const TokenTrainerOptions& o, const torch::Tensor& tokens, const torch::Tensor& valid,
                          const torch::Tensor& generated, const torch::Device& device) {
  if (!o.rule) return {};
  return blocked_columns(*o.rule, tokens, valid, generated).to(device);
}

// A pass of `model` over rows and the log-probabilities and entropies of
// their columns (head_log_probs: through the output layer a chunk at a
// time; with a copy head, which mixes in the context, from whole logits).
struct Scored {
  TransformerOutput out;
  torch::Tensor logp, entropy;
};
Scored score_rows(MoETransformer& model, const torch::Tensor& tokens, const torch::Tensor& valid, double temperature,
                  const BlockedTokens& blocked, const torch::Tensor& routes = {}) {
  Scored s;
  if (model->options().copy_head) {
    s.out = model->forward(tokens, valid, routes);
    std::tie(s.logp, s.entropy) = token_log_probs(s.out.logits, tokens, temperature, blocked);
  } else {
    s.out = model->forward_hidden(tokens, valid, routes);
    std::tie(s.logp, s.entropy) = head_log_probs(model, s.out.hidden, tokens, temperature, blocked);
  }
  return s;
}

// The rows `idx` of a [B, W, ...] tensor, cut to `width` columns.
torch::Tensor rows(const torch::Tensor& t, const torch::Tensor& idx, std::int64_t width) {
  return t.index_select(0, idx).narrow(1, 0, width);
}

}  // namespace

namespace {

ModelOptimizerOptions optimizer_options(const TokenTrainerOptions& o) {
  ModelOptimizerOptions m;
  m.lr = o.lr;
  m.eps = 1e-6;
  m.max_grad_norm = o.max_grad_norm;
  m.reduction = ModelOptimizerOptions::Reduction::sum;  // each rank's loss is its share of the batch's
  m.group = o.group;
  return m;
}

}  // namespace

std::int64_t TokenTrainerOptions::microbatch_tokens() const {
  // The loss is held a chunk at a time (head_log_probs); the layers'
  // activations grow with a microbatch. LoRA takes 2^23 / vocab tokens (256
  // at 32 k ids). Full fine-tuning keeps the budget: autocast casts every
  // weight once a microbatch (1.57x the time: docs/results/hf-models.md "LoRA").
  if (!model.lora_on()) return token_budget;
  constexpr std::int64_t kLogits = std::int64_t{1} << 23;
  return std::min(token_budget, std::max<std::int64_t>(64, kLogits / std::max<std::int64_t>(model.vocab, 1)));
}

struct TokenTrainer::Impl {
  explicit Impl(const TokenTrainerOptions& o)
      : device(o.device),
        model(make_trainable_transformer(o.model, o.seed, o.unfilled)),  // fp32 masters computing in o.model.dtype
        optimizer((model->to(device), model.ptr()), optimizer_options(o)) {}  // on the device before the optimizer
  torch::Device device;
  MoETransformer model;
  ModelOptimizer optimizer;
  MoETransformer reference{nullptr};  // kl_coef's (take_reference); null: none
};

TokenTrainer::TokenTrainer(const TokenTrainerOptions& o) : options_(o), impl_(std::make_unique<Impl>(o)) {}
TokenTrainer::~TokenTrainer() = default;
MoETransformer& TokenTrainer::model() { return impl_->model; }
const MoETransformer& TokenTrainer::model() const { return impl_->model; }
torch::Device TokenTrainer::device() const { return impl_->device; }

WeightSetData TokenTrainer::weights() const { return export_weights(*impl_->model, version_, "moe_transformer"); }
Result<void> TokenTrainer::load_weights(const WeightSetData& w) { return import_weights(*impl_->model, w); }

void TokenTrainer::save_state(torch::serialize::OutputArchive& a) const { impl_->optimizer.save(a); }
Result<void> TokenTrainer::load_state(torch::serialize::InputArchive& a) { return impl_->optimizer.load(a); }

Result<std::string> TokenTrainer::load_model_file(const std::string& path) {
  return load_start_weights(impl_->model, path);
}

Result<void> TokenTrainer::take_reference(const std::string& init, const std::string& init_adapter) {
  // Filled from `init` next when it is a Hugging Face checkpoint.
  auto ref = hf_init_dir(init).empty() ? make_seeded_transformer(options_.model, options_.seed)
                                       : make_unfilled_transformer(options_.model, options_.seed);
  if (!init.empty())
    if (auto read = load_start_weights(ref, init); !read) return read.error();
  if (auto adapter = load_init_adapter(ref, init_adapter); !adapter) return adapter.error();
  ref->to(impl_->device);
  for (auto& p : ref->parameters()) p.set_requires_grad(false);
  impl_->reference = ref;
  return {};
}

bool TokenTrainer::has_reference() const { return !impl_->reference.is_empty(); }

void TokenTrainer::supervised_microbatches(const std::vector<std::vector<std::int64_t>>& prompts,
                                           const std::vector<std::vector<std::int64_t>>& completions,
                                           const std::vector<std::vector<std::uint8_t>>& observed,
                                           const SupervisedMicrobatch& each) {
  const auto tokenizer = run_tokenizer(options_.tokenizer);
  auto r = supervised_rows(prompts, completions, tokenizer->pad(), tokenizer->eos(), observed);
  // Prompts are left-padded and completions right-padded: a microbatch
  // takes the columns its rows use (positions count real tokens, so
  // nothing else changes).
  const auto W = r.tokens.size(1);
  std::int64_t P = 0;
  for (const auto& p : prompts) P = std::max<std::int64_t>(P, static_cast<std::int64_t>(p.size()));
  std::vector<std::int64_t> width, lead;
  auto val = r.valid.accessor<bool, 2>();
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    std::int64_t last = P;
    for (std::int64_t c = W - 1; c >= P; --c)
      if (val[static_cast<std::int64_t>(b)][c]) {
        last = c + 1;
        break;
      }
    lead.push_back(P - static_cast<std::int64_t>(prompts[b].size()));
    width.push_back(last - lead.back());
  }
  const auto total = r.targets.sum().item<double>();
  for (const auto& mb : pack_by_length(width, options_.microbatch_tokens())) {
    auto idx = torch::tensor(mb, torch::kLong);
    std::int64_t first = W, end = 0;
    for (auto i : mb) first = std::min(first, lead[i]), end = std::max(end, lead[i] + width[i]);
    auto cut = [&](const torch::Tensor& t) {
      return t.index_select(0, idx).narrow(1, first, end - first).to(impl_->device);
    };
    each(cut(r.tokens), cut(r.valid), cut(r.targets), static_cast<double>(mb.size()) / static_cast<double>(prompts.size()),
         total);
  }
}

TokenUpdateStats TokenTrainer::sft_step(const std::vector<std::vector<std::int64_t>>& prompts,
                                        const std::vector<std::vector<std::int64_t>>& completions,
                                        const std::vector<std::vector<std::uint8_t>>& observed) {
  const auto& o = options_;
  auto& model = impl_->model;
  TokenUpdateStats s;
  impl_->optimizer.zero_grad();
  double targets = 0;
  supervised_microbatches(prompts, completions, observed,
                          [&](const torch::Tensor& tokens, const torch::Tensor& valid, const torch::Tensor& target,
                              double share, double total) {
                            const auto blocked = blocked_for(o, tokens, valid, target, tokens.device());
                            auto [out, logp, entropy] = score_rows(model, tokens, valid, 1.0, blocked);
                            auto tgt = target.to(logp.dtype());
                            auto ce = -(logp * tgt).sum() / total;
                            auto loss =
                                ce + share * (o.load_balance_coef * out.load_balance + o.router_z_coef * out.router_z);
                            loss.backward();
                            s.policy_loss += ce.item<double>();
                            s.entropy += (entropy * tgt).sum().item<double>() / total;
                            s.load_balance += share * out.load_balance.item<double>();
                            s.router_z += share * out.router_z.item<double>();
                            s.dropped_fraction += share * out.dropped_fraction;
                            ++s.microbatches;
                            targets = total;
                          });
  impl_->optimizer.step();
  s.tokens = static_cast<std::int64_t>(targets);
  return s;
}

SupervisedScore TokenTrainer::sft_score(const std::vector<std::vector<std::int64_t>>& prompts,
                                        const std::vector<std::vector<std::int64_t>>& completions,
                                        const std::vector<std::vector<std::uint8_t>>& observed) {
  torch::NoGradGuard guard;
  auto& model = impl_->model;
  SupervisedScore s;
  supervised_microbatches(prompts, completions, observed, [&](const torch::Tensor& tokens, const torch::Tensor& valid,
                                                              const torch::Tensor& target, double, double total) {
    if (total == 0) return;  // nothing to score
    auto logits = model->forward(tokens, valid).logits;
    const auto blocked = blocked_for(options_, tokens, valid, target, tokens.device());
    auto [logp, entropy] = token_log_probs(logits, tokens, 1.0, blocked);
    auto tgt = target.to(logp.dtype());
    const auto W = tokens.size(1);
    auto greedy = predicting(logits, blocked).argmax(-1) == tokens.narrow(1, 1, W - 1);  // predicts columns 1..W-1
    s.loss += -(logp * tgt).sum().item<double>() / total;
    s.accuracy += (greedy.to(tgt.dtype()) * tgt.narrow(1, 1, W - 1)).sum().item<double>() / total;
    s.tokens = static_cast<std::int64_t>(total);
  });
  return s;
}

TokenUpdateStats TokenTrainer::rl_step(const TokenBatch& batch) {
  const auto& o = options_;
  auto& model = impl_->model;
  const auto& g = batch.sequences;
  const auto B = g.tokens.size(0);
  RLX_REQUIRE(static_cast<std::int64_t>(batch.rewards.size()) == B && B % batch.group_size == 0, B,
              batch.rewards.size(), batch.group_size);
  TokenUpdateStats s;
  auto admitted = admit_tokens(g.versions, g.generated, version_, o.max_lag);
  const auto fresh = admitted.sum().item<std::int64_t>();
  // Masked rows (no outcome) train on nothing: none of their tokens is admitted.
  torch::Tensor scored;
  std::int64_t masked_rows = 0;
  if (!batch.masked.empty()) {
    RLX_REQUIRE(static_cast<std::int64_t>(batch.masked.size()) == B, batch.masked.size(), B);
    scored = torch::tensor(std::vector<std::int64_t>(batch.masked.begin(), batch.masked.end())) == 0;
    masked_rows = B - scored.sum().item<std::int64_t>();
    admitted = admitted & scored.unsqueeze(1);
  }
  const auto local_admitted = admitted.sum().item<std::int64_t>();

  auto rewards = torch::tensor(batch.rewards, torch::kFloat32);
  const bool grpo = o.algorithm == Algorithm::grpo;
  auto row_adv = !grpo                ? torch::Tensor()
                 : scored.defined() ? grpo_advantages_scored(rewards, scored, batch.group_size)
                                    : grpo_advantages(rewards, batch.group_size);
  // The rows that carry a policy gradient: under GRPO a row of advantage
  // 0 (every row of a group whose samples scored alike) contributes none,
  // so it is not computed. The surrogate stays averaged over every
  // admitted token of the batch: skipping changes the cost, not the step's
  // policy gradient.
  std::vector<std::int64_t> kept, width;
  if (local_admitted > 0)
    for (std::int64_t b = 0; b < B; ++b) {
      if (grpo && row_adv.data_ptr<float>()[b] == 0.0F) continue;
      if (scored.defined() && !scored[b].item<bool>()) continue;
      kept.push_back(b);
      width.push_back(g.prompt_width + g.lengths[b]);
    }
  std::int64_t hint_tokens = 0;
  const auto& device = impl_->device;
  const auto hinted =
      local_admitted > 0 ? hint_parts(o, batch, admitted, device, hint_tokens) : std::vector<HintPart>{};

  // A microbatch's rows, cut to its width, on the trainer's device
  // (idx, the rows' places in the batch, stays on the CPU).
  struct Part {
    torch::Tensor idx, prox, adv, mask, tokens, valid, behaviour, routes, generated, reward;
    torch::Tensor same;  // admitted tokens sampled at this very version (the sampler mismatch's)
    torch::Tensor ref;  // the reference's log-probs (kl_coef; undefined: none)
    BlockedTokens blocked;  // the decoding rule's, as the explorers sampled under it (empty: none)
    std::int64_t width = 0, n = 0;
  };
  std::vector<Part> parts;
  std::int64_t kept_tokens = 0;
  const auto same_version = admitted & (g.versions == static_cast<std::int64_t>(version_));
  for (const auto& mb : pack_by_length(width, o.microbatch_tokens())) {
    Part p;
    std::vector<std::int64_t> idx;
    for (auto i : mb) idx.push_back(kept[static_cast<std::size_t>(i)]), p.width = std::max(p.width, width[i]);
    p.idx = torch::tensor(idx, torch::kLong);
    p.tokens = rows(g.tokens, p.idx, p.width);
    p.valid = rows(g.valid, p.idx, p.width);
    p.generated = rows(g.generated, p.idx, p.width);
    p.blocked = blocked_for(o, p.tokens, p.valid, p.generated, device);
    p.tokens = p.tokens.to(device), p.valid = p.valid.to(device), p.generated = p.generated.to(device);
    p.mask = rows(admitted, p.idx, p.width).to(device);
    p.behaviour = rows(g.log_probs, p.idx, p.width).to(device);
    p.same = rows(same_version, p.idx, p.width).to(device);
    p.routes = g.routes.index_select(1, p.idx).narrow(2, 0, p.width).to(device);
    p.reward = rewards.index_select(0, p.idx).unsqueeze(1).to(device);  // [n, 1]
    p.n = p.mask.sum().item<std::int64_t>();
    kept_tokens += p.n;
    if (grpo) p.adv = row_adv.index_select(0, p.idx).unsqueeze(1).expand({-1, p.width}).to(device);
    parts.push_back(std::move(p));
  }

  // The whole batch's counts (over every rank when data-parallel): each
  // rank weighs its microbatches by their share of these.
  std::int64_t hinted_rows = 0;
  for (const auto& h : hinted) hinted_rows += h.n;
  const auto counts = sum_over_ranks({static_cast<double>(local_admitted), static_cast<double>(kept_tokens),
                                      static_cast<double>(hint_tokens), static_cast<double>(kept.size()),
                                      static_cast<double>(g.generated.sum().item<std::int64_t>() - fresh),
                                      static_cast<double>(local_admitted > 0 ? B - masked_rows - static_cast<std::int64_t>(kept.size()) : 0),
                                      static_cast<double>(hinted_rows)},
                                     o.group);
  const auto total = static_cast<std::int64_t>(counts[0]);
  const auto all_kept_tokens = static_cast<std::int64_t>(counts[1]);
  const auto all_hint_tokens = static_cast<std::int64_t>(counts[2]);
  const double rows_kept = std::max(counts[3], 1.0);
  s.tokens = total;
  s.stale_tokens = static_cast<std::int64_t>(counts[4]);
  s.skipped_rows = static_cast<std::int64_t>(counts[5]);
  s.hinted_rows = static_cast<std::int64_t>(counts[6]);
  if (total == 0) return s;  // nothing fresh enough: no step, the version stays
  impl_->optimizer.set_lr(warmup_lr(o.lr, o.warmup_updates, version_));
  if (counts[3] == 0 && s.hinted_rows == 0) {
    ++version_;  // trained on, with nothing to learn: the weights stay as they are
    return s;
  }

  // The proximal policy is these weights before any step of this update:
  // epoch 0's own forward pass, detached. A pass before training is needed
  // only for what epoch 0 cannot give before its loss: PPO's advantages
  // (values, normalised over the batch) and, under router replay, the
  // log-probs and routes of the policy's own routing.
  double mismatch = 0;
  // |prox - behaviour| summed over the `same` tokens, and their count: on
  // the device, read once after the update (no synchronisation per microbatch).
  auto sampler_sum = torch::zeros({}, torch::TensorOptions(device).dtype(torch::kFloat64));
  auto sampler_n = torch::zeros({}, torch::TensorOptions(device).dtype(torch::kLong));
  const auto sampler_gap = [&](const Part& p) {
    sampler_sum += (p.prox - p.behaviour).abs().masked_select(p.same).sum().to(torch::kFloat64);
    sampler_n += p.same.sum();
  };
  const bool pre_pass = !grpo || o.router_replay;
  if (pre_pass) {
    torch::NoGradGuard guard;
    for (auto& p : parts) {
      auto [out, prox, unused] = score_rows(model, p.tokens, p.valid, o.temperature, p.blocked);
      p.prox = prox;
      sampler_gap(p);
      mismatch += route_mismatch(out.routes, p.routes, p.generated) * static_cast<double>(p.idx.size(0)) / rows_kept;
      if (!grpo) {  // the value before token j (at column j - 1) predicts the row's reward
        auto v_before =
            torch::cat({torch::zeros({p.tokens.size(0), 1}, out.values.options()), out.values.narrow(1, 0, p.width - 1)}, 1);
        p.adv = p.reward - v_before;
      }
    }
    if (!grpo) {  // normalised over the admitted tokens (of every rank)
      double sum = 0, squares = 0;
      for (auto& p : parts) {
        auto a = p.adv.masked_select(p.mask).to(torch::kFloat64);
        sum += a.sum().item<double>();
        squares += a.pow(2).sum().item<double>();
      }
      const auto m = mean_std_over_ranks(sum, squares, static_cast<double>(kept_tokens), o.group);
      for (auto& p : parts) p.adv = (p.adv - m.mean) / (m.std + 1e-8);
    }
  }

  // The reference's log-probs, once: it never moves.
  const bool anchored = o.kl_coef > 0 && has_reference();
  if (anchored) {
    torch::NoGradGuard guard;
    for (auto& p : parts) p.ref = score_rows(impl_->reference, p.tokens, p.valid, o.temperature, p.blocked).logp;
  }

  double hint_kl_sum = 0, reference_kl = 0;
  for (std::int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    impl_->optimizer.zero_grad();
    for (auto& p : parts) {
      auto [out, logp, entropy] =
          score_rows(model, p.tokens, p.valid, o.temperature, p.blocked, o.router_replay ? p.routes : torch::Tensor());
      if (!p.prox.defined()) {
        p.prox = logp.detach();
        sampler_gap(p);
        mismatch += route_mismatch(out.routes, p.routes, p.generated) * static_cast<double>(p.idx.size(0)) / rows_kept;
      }
      const auto n = p.n;
      // pg_share keeps the surrogate a mean over all admitted tokens; share
      // weighs the auxiliary terms and statistics over the rows computed.
      const double pg_share = static_cast<double>(n) / static_cast<double>(total);
      const double share = all_kept_tokens > 0 ? static_cast<double>(n) / static_cast<double>(all_kept_tokens) : 0.0;
      LossStats ls;
      auto pg = token_ppo_loss(logp, p.prox, p.behaviour, p.adv, p.mask, o.clip, o.rho_bar, epoch == 0 ? &ls : nullptr,
                               o.decoupled);
      auto maskf = p.mask.to(logp.dtype());
      auto ent = n > 0 ? (entropy * maskf).sum() / static_cast<double>(n) : entropy.sum() * 0;
      auto loss = pg_share * pg - share * o.entropy_coef * ent +
                  share * (o.load_balance_coef * out.load_balance + o.router_z_coef * out.router_z);
      if (anchored && all_kept_tokens > 0) {
        auto kl = token_reference_kl(logp, p.ref, p.mask, all_kept_tokens);
        loss = loss + o.kl_coef * kl;
        if (epoch == 0) reference_kl += kl.item<double>();
      }
      if (!grpo && n > 0) {
        auto v_before =
            torch::cat({torch::zeros({p.tokens.size(0), 1}, out.values.options()), out.values.narrow(1, 0, p.width - 1)}, 1);
        auto vl = 0.5 * ((v_before - p.reward).pow(2) * maskf).sum() / static_cast<double>(n);
        loss = loss + share * o.value_coef * vl;
        s.value_loss += share * vl.item<double>() / static_cast<double>(o.epochs);
      }
      loss.backward();
      const double e = static_cast<double>(o.epochs);
      s.policy_loss += pg_share * pg.item<double>() / e;
      s.entropy += share * ent.item<double>() / e;
      s.load_balance += share * out.load_balance.item<double>() / e;
      s.router_z += share * out.router_z.item<double>() / e;
      s.dropped_fraction += share * out.dropped_fraction / e;
      if (epoch == 0) {
        s.correction.ratio_mean += share * ls.ratio_mean;
        s.correction.ratio_max = std::max(s.correction.ratio_max, ls.ratio_max);
        s.correction.truncated_fraction += share * ls.truncated_fraction;
      }
      ++s.microbatches;
    }
    double kl = 0;
    for (const auto& h : hinted) kl += distil(model, o, h, all_hint_tokens);
    if (epoch == 0) hint_kl_sum = kl;
    impl_->optimizer.step();
  }
  s.route_mismatch = mismatch;
  const auto sampler = sum_over_ranks(
      {sampler_sum.item<double>(), static_cast<double>(sampler_n.item<std::int64_t>())}, o.group);
  s.sampler_tokens = static_cast<std::int64_t>(sampler[1]);
  s.sampler_mismatch = sampler[1] > 0 ? sampler[0] / sampler[1] : 0.0;
  gather_stats(s, hint_kl_sum, reference_kl);
  if (all_hint_tokens > 0) s.hint_kl = hint_kl_sum / static_cast<double>(all_hint_tokens);
  s.reference_kl = reference_kl;
  ++version_;
  return s;
}

void TokenTrainer::gather_stats(TokenUpdateStats& s, double& hint_kl_sum, double& reference_kl) const {
  if (!options_.group || options_.group->world() == 1) return;
  // Each rank's share-weighted terms add up to the batch's; the largest
  // ratio is the largest of the ranks' (each puts its own in its slot).
  const auto world = static_cast<std::size_t>(options_.group->world());
  std::vector<double> v{s.policy_loss, s.value_loss, s.entropy, s.load_balance, s.router_z, s.dropped_fraction,
                        s.correction.ratio_mean, s.correction.truncated_fraction, s.route_mismatch, hint_kl_sum,
                        static_cast<double>(s.microbatches), reference_kl};
  const std::size_t slots = v.size();
  v.resize(slots + world, 0.0);
  v[slots + static_cast<std::size_t>(options_.group->rank())] = s.correction.ratio_max;
  v = sum_over_ranks(std::move(v), options_.group);
  s.policy_loss = v[0], s.value_loss = v[1], s.entropy = v[2], s.load_balance = v[3], s.router_z = v[4];
  s.dropped_fraction = v[5], s.correction.ratio_mean = v[6], s.correction.truncated_fraction = v[7];
  s.route_mismatch = v[8], hint_kl_sum = v[9], s.microbatches = static_cast<std::int64_t>(v[10]), reference_kl = v[11];
  s.correction.ratio_max = *std::max_element(v.begin() + static_cast<std::ptrdiff_t>(slots), v.end());
}

}  // namespace rlx
