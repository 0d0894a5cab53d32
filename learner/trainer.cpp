#include "learner/trainer.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <torch/torch.h>

#include <atomic>
#include <sstream>

#include "core/error.hpp"
#include "learner/learner_group.hpp"
#include "learner/losses.hpp"
#include "learner/returns.hpp"
#include "learner/lr_schedule.hpp"
#include "learner/token_trainer.hpp"
#include "policy/token_segment.hpp"
#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

// A batch flattened to N = sum(T * B) rows, plus the per-segment [T, B]
// views the return estimators need.
struct Batch {
  torch::Tensor obs;        // [N, D]
  torch::Tensor actions;    // [N]
  torch::Tensor behaviour;  // [N]
  struct Part {
    std::int64_t offset, T, B;
    torch::Tensor rewards, terminated, truncated, boot_obs;  // [T,B] x3, [B, D]
  };
  std::vector<Part> parts;
  std::uint64_t steps = 0;
};

}  // namespace

struct Trainer::Impl {
  explicit Impl(const TrainerOptions& o) : options(o), device(o.learner.device) {
    policy = make_seeded_policy(
        PolicyOptions{o.obs_dim, o.num_actions, o.policy.hidden, o.policy.experts, o.policy.top_k}, o.seed);
    policy->to(device);
    optimizer = std::make_unique<torch::optim::Adam>(policy->parameters(),
                                                     torch::optim::AdamOptions(o.learner.lr).eps(1e-5));
    generator = at::make_generator<at::CPUGeneratorImpl>(o.seed + 7919);
  }
  Batch make_batch(const std::vector<const Segment*>& segments);
  UpdateStats update_ppo(Batch& b);
  UpdateStats update_vtrace(Batch& b);
  // One optimizer step on pg + value + entropy + load-balancing terms;
  // accumulates the terms into `stats` (averaged by finish()).
  void step(const torch::Tensor& pg, const torch::Tensor& vl, const torch::Tensor& entropy, const PolicyOutput& out,
            UpdateStats& stats, int& steps);
  static void finish(UpdateStats& stats, int steps);

  // Advantages scaled to mean 0, std 1: over this batch, or over every
  // rank's batch together when data-parallel (so N ranks x B rows train as
  // one rank with N x B would).
  torch::Tensor normalise(const torch::Tensor& adv) const;

  const TrainerOptions options;
  torch::Device device;
  MoEMlpPolicy policy{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  at::Generator generator;
};

Result<bool> check_device(const std::string& device) {
  try {
    const torch::Device d(device);
    if (d.is_cpu()) return true;
    if (!d.is_cuda()) return make_error(Errc::config_range, "device \"" + device + "\": only cpu and cuda are supported");
    if (!torch::cuda::is_available())
      return make_error(Errc::config_range,
                        "device \"" + device + "\" asked for, but this LibTorch has no CUDA or no GPU is visible "
                        "(build with -DRLX_CUDA=ON against a CUDA LibTorch, docs/data-parallel.md \"GPUs\")");
    const auto index = d.has_index() ? d.index() : 0;
    if (index >= static_cast<int>(torch::cuda::device_count()))
      return make_error(Errc::config_range, "device \"" + device + "\": only " +
                                                std::to_string(torch::cuda::device_count()) + " GPU(s) visible");
    return true;
  } catch (const c10::Error& e) {
    return make_error(Errc::config_range, "device \"" + device + "\": " + e.what_without_backtrace());
  }
}

namespace {

TokenTrainerOptions token_options(const TrainerOptions& o) {
  TokenTrainerOptions t;
  t.model = transformer_options(o.policy, Tokenizer::vocab);
  t.algorithm = o.learner.algorithm;
  t.lr = o.learner.lr;
  t.warmup_updates = o.learner.warmup_updates;
  t.epochs = o.learner.epochs;
  t.clip = o.learner.clip;
  t.rho_bar = o.learner.rho_bar;
  t.temperature = o.tokens.temperature;
  t.max_lag = o.max_staleness;
  t.router_replay = o.policy.router_replay;
  t.load_balance_coef = o.policy.load_balance_coef;
  t.router_z_coef = o.policy.router_z_coef;
  t.value_coef = o.learner.value_coef;
  t.entropy_coef = o.learner.entropy_coef;
  t.max_grad_norm = o.learner.max_grad_norm;
  t.hint_coef = o.tokens.hint_coef;
  t.seed = o.seed;
  t.device = o.learner.device;
  t.group = o.group;
  return t;
}

}  // namespace

Result<bool> check_policy_init(const PolicyConfig& policy) {
  if (policy.kind != "moe_transformer" || policy.init.empty()) return true;
  TrainerOptions o;
  o.policy = policy;
  TokenTrainer t(token_options(o));
  return t.load_model_file(policy.init);
}

Trainer::Trainer(const TrainerOptions& o) : options_(o) {
  renew_state_id();
  if (o.policy.kind != "moe_transformer") {
    impl_ = std::make_unique<Impl>(o);
    return;
  }
  tokens_ = std::make_unique<TokenTrainer>(token_options(o));
  // Ranks 1..N-1 take rank 0's whole state before their first update
  // (LearnerCore::train): only rank 0 reads the start's file.
  const bool other_rank = o.group != nullptr && o.group->rank() > 0;
  if (!o.policy.init.empty() && !other_rank) {
    auto ok = tokens_->load_model_file(o.policy.init);
    RLX_REQUIRE(ok.ok(), ok.error().message);  // checked at start (check_policy_init)
  }
}

std::vector<std::uint8_t> Trainer::save_state() const {
  torch::serialize::OutputArchive a;
  if (tokens_) {
    tokens_->save_state(a);
    a.write("version", torch::tensor(static_cast<std::int64_t>(version_)));
    std::ostringstream os;
    a.save_to(os);
    const std::string s = os.str();
    return {s.begin(), s.end()};
  }
  for (const auto& p : impl_->policy->named_parameters(true)) a.write("param/" + p.key(), p.value().detach().cpu());
  torch::serialize::OutputArchive opt;
  impl_->optimizer->save(opt);
  a.write("optimizer", opt);
  a.write("generator", impl_->generator.get_state());
  a.write("version", torch::tensor(static_cast<std::int64_t>(version_)));
  std::ostringstream os;
  a.save_to(os);
  const std::string s = os.str();
  return {s.begin(), s.end()};
}

Result<bool> Trainer::load_state(const std::vector<std::uint8_t>& bytes) {
  try {
    std::istringstream is(std::string(bytes.begin(), bytes.end()));
    torch::serialize::InputArchive a;
    // Onto this trainer's device: the optimizer's moments must live with its parameters.
    a.load_from(is, impl_ ? impl_->device : tokens_->device());
    torch::NoGradGuard guard;
    if (tokens_) {
      tokens_->load_state(a);
      torch::Tensor v;
      a.read("version", v);
      version_ = static_cast<std::uint64_t>(v.item<std::int64_t>());
      renew_state_id();
      return true;
    }
    for (auto& p : impl_->policy->named_parameters(true)) {
      torch::Tensor t;
      a.read("param/" + p.key(), t);
      if (t.sizes() != p.value().sizes())
        return make_error(Errc::invalid_field, "checkpoint parameter " + p.key() + " has another shape");
      p.value().copy_(t);
    }
    torch::serialize::InputArchive opt;
    a.read("optimizer", opt);
    impl_->optimizer->load(opt);
    torch::Tensor g, v;
    a.read("generator", g);
    impl_->generator.set_state(g.cpu());  // a CPU generator, whatever the device
    a.read("version", v);
    version_ = static_cast<std::uint64_t>(v.item<std::int64_t>());
    renew_state_id();
    return true;
  } catch (const c10::Error& e) {
    return make_error(Errc::invalid_field, std::string("checkpoint: ") + e.what_without_backtrace());
  }
}
Trainer::~Trainer() = default;

void Trainer::renew_state_id() {
  static std::atomic<std::uint64_t> next{1};
  state_id_ = next.fetch_add(1);
}

WeightSetData Trainer::weights() const {
  if (tokens_) {
    auto w = tokens_->weights();
    w.version = version_;
    w.policy_kind = options_.policy.kind;
    w.checksum = w.compute_checksum();
    return w;
  }
  return export_weights(*impl_->policy, version_, options_.policy.kind);
}

Batch Trainer::Impl::make_batch(const std::vector<const Segment*>& segments) {
  RLX_REQUIRE(!segments.empty());
  Batch b;
  std::vector<torch::Tensor> obs, act, beh;
  std::int64_t offset = 0;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  for (const Segment* s : segments) {
    RLX_REQUIRE(s->obs_dim == options.obs_dim, s->obs_dim, options.obs_dim);
    const std::int64_t T = s->num_steps, B = s->num_envs, D = s->obs_dim;
    auto clone = [](const auto& v, std::vector<std::int64_t> shape, torch::Dtype dt) {
      return torch::from_blob(const_cast<void*>(static_cast<const void*>(v.data())), shape, dt).clone();
    };
    obs.push_back(clone(s->observations, {T * B, D}, torch::kFloat32));
    act.push_back(clone(s->actions, {T * B}, torch::kInt64));
    beh.push_back(clone(s->behaviour_log_probs, {T * B}, torch::kFloat32));
    Batch::Part p{offset, T, B,
                  clone(s->rewards, {T, B}, torch::kFloat32),
                  clone(s->terminated, {T, B}, torch::kUInt8).to(f32),
                  clone(s->truncated, {T, B}, torch::kUInt8).to(f32),
                  clone(s->bootstrap_observations, {B, D}, torch::kFloat32)};
    b.parts.push_back(std::move(p));
    offset += T * B;
    b.steps += s->env_steps();
  }
  b.obs = torch::cat(obs).to(device);
  b.actions = torch::cat(act).to(device);
  b.behaviour = torch::cat(beh).to(device);
  if (!device.is_cpu())
    for (auto& p : b.parts) {
      p.rewards = p.rewards.to(device);
      p.terminated = p.terminated.to(device);
      p.truncated = p.truncated.to(device);
      p.boot_obs = p.boot_obs.to(device);
    }
  return b;
}

namespace {

// next_values and continues of one part (see returns.hpp).
std::pair<torch::Tensor, torch::Tensor> bootstrap(const torch::Tensor& values, const torch::Tensor& boot_values,
                                                  const torch::Tensor& terminated, const torch::Tensor& truncated) {
  const auto T = values.size(0);
  auto next = torch::cat({values.narrow(0, 1, T - 1), boot_values.unsqueeze(0)}, 0);
  next = next * (1 - terminated) * (1 - truncated) + values * truncated;
  auto done = torch::clamp_max(terminated + truncated, 1.0);
  return {next, 1 - done};
}

// Each hinted row's prompt with its hint in it (empty: no hint).
std::vector<std::vector<std::int64_t>> teacher_prompts(const Generation& g, const std::vector<std::string>& hints) {
  std::vector<std::vector<std::int64_t>> out(hints.size());
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto val = g.valid.accessor<bool, 2>();
  for (std::size_t b = 0; b < hints.size(); ++b) {
    if (hints[b].empty()) continue;
    std::vector<std::int64_t> prompt;
    for (std::int64_t c = 0; c < g.prompt_width; ++c)
      if (val[static_cast<std::int64_t>(b)][c]) prompt.push_back(tok[static_cast<std::int64_t>(b)][c]);
    out[b] = hinted_prompt(prompt, hints[b]);
  }
  return out;
}

}  // namespace

std::string Trainer::refuses(const Segment& segment) const {
  if (tokens_) return segment.tokens ? "" : "a segment without tokens for the token policy";
  if (segment.tokens) return "a token segment for the " + options_.policy.kind + " policy";
  if (segment.obs_dim != options_.obs_dim) return "obs_dim mismatch";
  return "";
}

Result<UpdateStats> Trainer::update(const std::vector<const Segment*>& segments) {
  try {
    for (const Segment* s : segments)
      if (auto why = refuses(*s); !why.empty()) return make_error(Errc::invalid_field, why);
    if (tokens_) {
      const auto& m = tokens_->options().model;
      auto rows = token_rows(segments, m.layers, m.top_k);
      TokenBatch batch{std::move(rows.rows), std::move(rows.rewards), rows.group_size, {}};
      if (tokens_->options().hint_coef > 0) batch.teacher_prompts = teacher_prompts(batch.sequences, rows.hints);
      tokens_->set_version(version_);
      const auto t = tokens_->rl_step(batch);
      UpdateStats s;
      s.policy_loss = t.policy_loss;
      s.value_loss = t.value_loss;
      s.entropy = t.entropy;
      s.load_balance = t.load_balance;
      s.correction = t.correction;
      s.route_mismatch = t.route_mismatch;
      s.stale_tokens = static_cast<std::uint64_t>(t.stale_tokens);
      s.hint_kl = t.hint_kl;
      s.hinted_rows = static_cast<std::uint64_t>(t.hinted_rows);
      s.skipped_rows = static_cast<std::uint64_t>(t.skipped_rows);
      for (const Segment* x : segments) s.steps += x->env_steps();
      ++version_;  // even when every token was stale: the learner's contract is one version per batch
      return s;
    }
    Batch b = impl_->make_batch(segments);
    set_lr(*impl_->optimizer, warmup_lr(options_.learner.lr, options_.learner.warmup_updates, version_));
    UpdateStats s = options_.learner.algorithm == "vtrace" ? impl_->update_vtrace(b) : impl_->update_ppo(b);
    s.steps = b.steps;
    ++version_;
    return s;
  } catch (const c10::Error& e) {
    // LibTorch refused the batch (a shape or value it cannot use): the
    // caller counts and drops it; the policy keeps its previous weights
    // unless an optimizer step already ran.
    return make_error(Errc::invalid_field, std::string("update failed: ") + e.what_without_backtrace());
  }
}

UpdateStats Trainer::Impl::update_ppo(Batch& b) {
  const auto& L = options.learner;
  const std::int64_t N = b.obs.size(0);
  torch::Tensor adv_all, ret_all, prox_all;
  UpdateStats stats;
  {
    torch::NoGradGuard guard;
    auto out = policy->forward(b.obs);
    prox_all = torch::log_softmax(out.logits, -1).gather(1, b.actions.unsqueeze(1)).squeeze(1);
    std::vector<torch::Tensor> advs, rets;
    for (auto& p : b.parts) {
      auto v = out.value.narrow(0, p.offset, p.T * p.B).view({p.T, p.B});
      auto boot = policy->forward(p.boot_obs).value;
      auto [next, cont] = bootstrap(v, boot, p.terminated, p.truncated);
      auto g = gae(p.rewards, v, next, cont, L.gamma, L.gae_lambda);
      advs.push_back(g.advantages.reshape({-1}));
      rets.push_back(g.returns.reshape({-1}));
    }
    adv_all = torch::cat(advs);
    ret_all = torch::cat(rets);
    // Behaviour-ratio statistics over the whole batch.
    decoupled_ppo_loss(prox_all, prox_all, b.behaviour, adv_all, L.clip, L.rho_bar, &stats.correction);
  }
  const std::int64_t mb = std::max<std::int64_t>(1, N / L.minibatches);
  int n = 0;
  for (std::int64_t epoch = 0; epoch < L.epochs; ++epoch) {
    auto perm = torch::randperm(N, generator, torch::TensorOptions().dtype(torch::kLong)).to(device);
    for (std::int64_t start = 0; start + mb <= N; start += mb) {
      auto idx = perm.narrow(0, start, mb);
      auto out = policy->forward(b.obs.index_select(0, idx));
      auto logp_all = torch::log_softmax(out.logits, -1);
      auto logp = logp_all.gather(1, b.actions.index_select(0, idx).unsqueeze(1)).squeeze(1);
      auto entropy = -(logp_all.exp() * logp_all).sum(-1).mean();
      auto adv = adv_all.index_select(0, idx);
      adv = normalise(adv);
      auto pg = decoupled_ppo_loss(logp, prox_all.index_select(0, idx), b.behaviour.index_select(0, idx), adv, L.clip,
                                   L.rho_bar);
      auto vl = 0.5 * (out.value - ret_all.index_select(0, idx)).pow(2).mean();
      step(pg, vl, entropy, out, stats, n);
    }
  }
  finish(stats, n);
  return stats;
}

void Trainer::Impl::step(const torch::Tensor& pg, const torch::Tensor& vl, const torch::Tensor& entropy,
                         const PolicyOutput& out, UpdateStats& stats, int& steps) {
  const auto& L = options.learner;
  auto loss = pg + L.value_coef * vl - L.entropy_coef * entropy + options.policy.load_balance_coef * out.load_balance;
  optimizer->zero_grad();
  loss.backward();
  if (options.group) options.group->average_gradients(policy->parameters());  // each rank's loss a mean over its rows
  if (L.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(policy->parameters(), L.max_grad_norm);
  optimizer->step();
  stats.policy_loss += pg.item<double>();
  stats.value_loss += vl.item<double>();
  stats.entropy += entropy.item<double>();
  stats.load_balance += out.load_balance.item<double>();
  auto frac = out.expert_fraction;
  stats.expert_utilisation.assign(frac.data_ptr<float>(), frac.data_ptr<float>() + frac.numel());
  ++steps;
}

torch::Tensor Trainer::Impl::normalise(const torch::Tensor& adv) const {
  if (!options.group) return (adv - adv.mean()) / (adv.std() + 1e-8);
  // Sum, sum of squares and count over all ranks (float64), then the
  // unbiased std as torch's std() computes it.
  auto stats = torch::stack({adv.sum(), adv.pow(2).sum(), torch::tensor(static_cast<double>(adv.numel()))
                                                                  .to(adv.device())
                                                                  .to(adv.scalar_type())})
                   .to(torch::kCPU, torch::kFloat64);
  options.group->sum(stats);
  const double n = stats[2].item<double>(), mean = stats[0].item<double>() / n;
  const double var = std::max(0.0, (stats[1].item<double>() - n * mean * mean) / std::max(1.0, n - 1));
  return (adv - mean) / (std::sqrt(var) + 1e-8);
}

void Trainer::Impl::finish(UpdateStats& stats, int steps) {
  if (steps == 0) return;
  stats.policy_loss /= steps;
  stats.value_loss /= steps;
  stats.entropy /= steps;
  stats.load_balance /= steps;
}

UpdateStats Trainer::Impl::update_vtrace(Batch& b) {
  const auto& L = options.learner;
  UpdateStats stats;
  int n = 0;
  for (std::int64_t epoch = 0; epoch < L.epochs; ++epoch) {
    auto out = policy->forward(b.obs);
    auto logp_all = torch::log_softmax(out.logits, -1);
    auto logp = logp_all.gather(1, b.actions.unsqueeze(1)).squeeze(1);
    std::vector<torch::Tensor> vss, pgs;
    {
      torch::NoGradGuard guard;
      auto log_rhos_all = logp.detach() - b.behaviour;
      for (auto& p : b.parts) {
        auto v = out.value.detach().narrow(0, p.offset, p.T * p.B).view({p.T, p.B});
        auto boot = policy->forward(p.boot_obs).value;
        auto [next, cont] = bootstrap(v, boot, p.terminated, p.truncated);
        auto lr = log_rhos_all.narrow(0, p.offset, p.T * p.B).view({p.T, p.B});
        auto r = vtrace(lr, p.rewards, v, next, cont, L.gamma, L.rho_bar, L.c_bar);
        vss.push_back(r.vs.reshape({-1}));
        pgs.push_back(r.pg_advantages.reshape({-1}));
      }
      if (epoch == 0) {
        auto ratio = log_rhos_all.exp();
        stats.correction.ratio_mean = ratio.mean().item<double>();
        stats.correction.ratio_max = ratio.max().item<double>();
        stats.correction.truncated_fraction = (ratio > L.rho_bar).to(torch::kFloat32).mean().item<double>();
      }
    }
    auto vs = torch::cat(vss);
    auto pg_adv = torch::cat(pgs);
    pg_adv = normalise(pg_adv);
    auto entropy = -(logp_all.exp() * logp_all).sum(-1).mean();
    auto pg = -(pg_adv * logp).mean();
    auto vl = 0.5 * (out.value - vs).pow(2).mean();
    step(pg, vl, entropy, out, stats, n);
  }
  finish(stats, n);
  return stats;
}

}  // namespace rlx
