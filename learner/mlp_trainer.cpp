#include "learner/mlp_trainer.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/error.hpp"
#include "learner/losses.hpp"
#include "learner/lr_schedule.hpp"
#include "learner/model_optimizer.hpp"
#include "learner/returns.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/weights_wire.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

// A batch flattened to N = sum(T * B) rows, plus the per-segment [T, B]
// views the return estimators need.
struct Batch {
  torch::Tensor obs;        // [N, D]
  torch::Tensor actions;    // [N]
  torch::Tensor behaviour;  // [N]
  // [N] float, 1 = trained on, 0 = masked (an episode the machinery failed
  // to give an outcome); undefined when no row is masked.
  torch::Tensor keep;
  struct Part {
    std::int64_t offset, T, B;
    torch::Tensor rewards, terminated, truncated, boot_obs;  // [T,B] x3, [B, D]
    // The states time limits cut episodes in ([K, D]) and where (flat
    // indices into [T * B]); undefined for a segment of an older build.
    torch::Tensor cut_obs, cut_at;
  };
  std::vector<Part> parts;
  std::uint64_t steps = 0;
};


ModelOptimizerOptions optimizer_options(const TrainerOptions& o) {
  ModelOptimizerOptions m;
  m.lr = o.learner.lr;
  m.eps = 1e-5;
  m.max_grad_norm = o.learner.max_grad_norm;
  m.reduction = ModelOptimizerOptions::Reduction::average;  // each rank's loss a mean over its rows
  m.group = o.group;
  return m;
}

}  // namespace

struct MlpTrainer::Impl {
  explicit Impl(const TrainerOptions& o)
      : options(o),
        device(o.learner.device),
        policy(make_seeded_policy(
            PolicyOptions{o.obs_dim, o.num_actions, o.policy.hidden, o.policy.experts, o.policy.top_k}, o.seed)),
        optimizer((policy->to(device), policy.ptr()), optimizer_options(o)),
        generator(at::make_generator<at::CPUGeneratorImpl>(o.seed + 7919)) {}
  Batch make_batch(const std::vector<const Segment*>& segments) const;
  UpdateStats update_ppo(Batch& b);
  UpdateStats update_vtrace(Batch& b);
  // next_values and continues of one part, its values V(x_t) [T, B] given.
  std::pair<torch::Tensor, torch::Tensor> bootstrap(const Batch::Part& p, const torch::Tensor& values);
  // One optimizer step on pg + value + entropy + load-balancing terms;
  // accumulates the terms into `stats` (averaged by finish()).
  void step(const torch::Tensor& pg, const torch::Tensor& vl, const torch::Tensor& entropy, const PolicyOutput& out,
            UpdateStats& stats, int& steps);
  static void finish(UpdateStats& stats, int steps);
  // Advantages scaled to mean 0, std 1: over this batch, or over every
  // rank's batch together when data-parallel (so N ranks x B rows train as
  // one rank with N x B would).
  // With `keep`, over the kept rows only.
  torch::Tensor normalise(const torch::Tensor& adv, const torch::Tensor& keep = {}) const;

  const TrainerOptions options;
  torch::Device device;
  MoEMlpPolicy policy;
  ModelOptimizer optimizer;
  at::Generator generator;
};

MlpTrainer::MlpTrainer(const TrainerOptions& o) : Trainer(o.learner.device), impl_(std::make_unique<Impl>(o)) {}
MlpTrainer::~MlpTrainer() = default;

std::string MlpTrainer::refuses(const Segment& segment) const {
  if (segment.tokens) return "a token segment for the " + to_string(impl_->options.policy.kind) + " policy";
  if (segment.obs_dim != impl_->options.obs_dim) return "obs_dim mismatch";
  // An action the policy does not have would fail the whole batch's update.
  for (const auto a : segment.actions)
    if (a < 0 || a >= impl_->options.num_actions)
      return fmt::format("action {} out of range (the policy has {})", a, impl_->options.num_actions);
  return "";
}

WeightSetData MlpTrainer::weights() const {
  return export_weights(*impl_->policy, version(), to_string(impl_->options.policy.kind));
}

EncodedWeightSet MlpTrainer::encoded_weights(std::uint64_t created_unix_ns) const {
  return encode_module_weights(*impl_->policy, version(), to_string(impl_->options.policy.kind), created_unix_ns,
                               "learner");
}

void MlpTrainer::save(torch::serialize::OutputArchive& a) const {
  impl_->optimizer.save(a);
  a.write("generator", impl_->generator.get_state());
}

Result<void> MlpTrainer::load(torch::serialize::InputArchive& a) {
  torch::Tensor g;
  a.read("generator", g);  // before anything changes: a missing record throws here
  if (auto ok = impl_->optimizer.load(a); !ok) return ok;
  impl_->generator.set_state(g.cpu());  // a CPU generator, whatever the device
  return {};
}

UpdateStats MlpTrainer::train(const std::vector<const Segment*>& segments) {
  const auto& L = impl_->options.learner;
  Batch b = impl_->make_batch(segments);
  impl_->optimizer.set_lr(warmup_lr(L.lr, L.warmup_updates, version()));
  UpdateStats s = L.algorithm == Algorithm::vtrace ? impl_->update_vtrace(b) : impl_->update_ppo(b);
  s.steps = b.steps;
  return s;
}

Batch MlpTrainer::Impl::make_batch(const std::vector<const Segment*>& segments) const {
  RLX_REQUIRE(!segments.empty());
  Batch b;
  std::vector<torch::Tensor> obs, act, beh, keep;
  bool any_masked = false;
  std::int64_t offset = 0;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  for (const Segment* s : segments) {
    RLX_REQUIRE(s->obs_dim == options.obs_dim, s->obs_dim, options.obs_dim);
    const std::int64_t T = s->num_steps, B = s->num_envs, D = s->obs_dim;
    // A tensor over the segment's column (the received message's bytes):
    // each training tensor below is made from it with one copy (cat, a
    // dtype conversion or a clone).
    auto view = [](const auto& v, std::vector<std::int64_t> shape, torch::Dtype dt) {
      return torch::from_blob(const_cast<void*>(static_cast<const void*>(v.data())), shape, dt);
    };
    auto clone = [&](const auto& v, std::vector<std::int64_t> shape, torch::Dtype dt) { return view(v, shape, dt).clone(); };
    obs.push_back(view(s->observations, {T * B, D}, torch::kFloat32));
    act.push_back(view(s->actions, {T * B}, torch::kInt64));
    beh.push_back(view(s->behaviour_log_probs, {T * B}, torch::kFloat32));
    keep.push_back(s->masked.empty() ? torch::ones({T * B}, f32) : 1 - view(s->masked, {T * B}, torch::kUInt8).to(f32));
    any_masked = any_masked || !s->masked.empty();
    Batch::Part p{offset, T, B,
                  clone(s->rewards, {T, B}, torch::kFloat32),
                  view(s->terminated, {T, B}, torch::kUInt8).to(f32),
                  view(s->truncated, {T, B}, torch::kUInt8).to(f32),
                  clone(s->bootstrap_observations, {B, D}, torch::kFloat32), {}, {}};
    if (!s->truncation_observations.empty()) {
      std::vector<std::int64_t> at;
      for (std::int64_t i = 0; i < T * B; ++i)
        if (s->truncated[i] && !s->terminated[i]) at.push_back(i);
      p.cut_obs = clone(s->truncation_observations, {static_cast<std::int64_t>(at.size()), D}, torch::kFloat32);
      p.cut_at = torch::tensor(at, torch::kLong);
    }
    b.parts.push_back(std::move(p));
    offset += T * B;
    b.steps += s->env_steps();
  }
  b.obs = torch::cat(obs).to(device);
  b.actions = torch::cat(act).to(device);
  b.behaviour = torch::cat(beh).to(device);
  if (any_masked) b.keep = torch::cat(keep).to(device);
  if (!device.is_cpu())
    for (auto& p : b.parts) {
      p.rewards = p.rewards.to(device);
      p.terminated = p.terminated.to(device);
      p.truncated = p.truncated.to(device);
      p.boot_obs = p.boot_obs.to(device);
      if (p.cut_obs.defined()) p.cut_obs = p.cut_obs.to(device), p.cut_at = p.cut_at.to(device);
    }
  return b;
}

UpdateStats MlpTrainer::Impl::update_ppo(Batch& b) {
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
      auto [next, cont] = bootstrap(p, v);
      auto g = gae(p.rewards, v, next, cont, L.gamma, L.gae_lambda);
      advs.push_back(g.advantages.reshape({-1}));
      rets.push_back(g.returns.reshape({-1}));
    }
    adv_all = torch::cat(advs);
    ret_all = torch::cat(rets);
    // Behaviour-ratio statistics over the whole batch.
    decoupled_ppo_loss(prox_all, prox_all, b.behaviour, adv_all, L.clip, L.rho_bar, &stats.correction);
    // Masked rows (no outcome) count in no loss; the minibatches stay the
    // same on every rank, so data-parallel ranks step together.
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
      const auto keep = b.keep.defined() ? b.keep.index_select(0, idx) : torch::Tensor();
      auto entropy = masked_mean(-(logp_all.exp() * logp_all).sum(-1), keep);
      auto adv = normalise(adv_all.index_select(0, idx), keep);
      auto pg = decoupled_ppo_loss(logp, prox_all.index_select(0, idx), b.behaviour.index_select(0, idx), adv, L.clip,
                                   L.rho_bar, nullptr, keep, L.correction == Correction::decoupled);
      auto vl = 0.5 * masked_mean((out.value - ret_all.index_select(0, idx)).pow(2), keep);
      step(pg, vl, entropy, out, stats, n);
    }
  }
  finish(stats, n);
  return stats;
}

std::pair<torch::Tensor, torch::Tensor> MlpTrainer::Impl::bootstrap(const Batch::Part& p, const torch::Tensor& v) {
  auto boot = policy->forward(p.boot_obs).value;
  auto cut_values = v;  // older segments: V(x_t) stands in for the state a time limit cut
  if (p.cut_obs.defined() && p.cut_obs.size(0) > 0)
    cut_values = torch::zeros_like(v).view({-1}).index_put({p.cut_at}, policy->forward(p.cut_obs).value).view({p.T, p.B});
  auto b = bootstrap_targets(v, boot, p.terminated, p.truncated, cut_values);
  return {b.next_values, b.continues};
}

void MlpTrainer::Impl::step(const torch::Tensor& pg, const torch::Tensor& vl, const torch::Tensor& entropy,
                            const PolicyOutput& out, UpdateStats& stats, int& steps) {
  const auto& L = options.learner;
  auto loss = pg + L.value_coef * vl - L.entropy_coef * entropy + options.policy.load_balance_coef * out.load_balance;
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
  stats.policy_loss += pg.item<double>();
  stats.value_loss += vl.item<double>();
  stats.entropy += entropy.item<double>();
  stats.load_balance += out.load_balance.item<double>();
  auto frac = out.expert_fraction;
  stats.expert_utilisation.assign(frac.data_ptr<float>(), frac.data_ptr<float>() + frac.numel());
  ++steps;
}

torch::Tensor MlpTrainer::Impl::normalise(const torch::Tensor& adv, const torch::Tensor& keep) const {
  if (!keep.defined()) {
    if (!options.group) return (adv - adv.mean()) / (adv.std() + 1e-8);
    const auto m = mean_std_over_ranks(adv.sum().item<double>(), adv.pow(2).sum().item<double>(),
                                       static_cast<double>(adv.numel()), options.group);
    return (adv - m.mean) / (m.std + 1e-8);
  }
  // Over the kept rows (a masked row's value is then multiplied by 0).
  const double n = keep.sum().item<double>(), sum = (adv * keep).sum().item<double>(),
               squares = (adv.pow(2) * keep).sum().item<double>();
  const auto m = mean_std_over_ranks(sum, squares, n, options.group);
  return (adv - m.mean) / (m.std + 1e-8) * keep;
}

void MlpTrainer::Impl::finish(UpdateStats& stats, int steps) {
  if (steps == 0) return;
  stats.policy_loss /= steps;
  stats.value_loss /= steps;
  stats.entropy /= steps;
  stats.load_balance /= steps;
}

UpdateStats MlpTrainer::Impl::update_vtrace(Batch& b) {
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
        auto [next, cont] = bootstrap(p, v);
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
    auto pg_adv = normalise(torch::cat(pgs), b.keep);
    auto entropy = masked_mean(-(logp_all.exp() * logp_all).sum(-1), b.keep);
    auto pg = -masked_mean(pg_adv * logp, b.keep);
    auto vl = 0.5 * masked_mean((out.value - vs).pow(2), b.keep);
    step(pg, vl, entropy, out, stats, n);
  }
  finish(stats, n);
  return stats;
}

}  // namespace rlx
