#include "explorers/rollout.hpp"

#include "core/clock.hpp"

#include <chrono>
#include <cstring>

#include <torch/torch.h>

#include "policy/moe_mlp_policy.hpp"
#include "policy/sampling.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

struct Rollout::Policy {
  MoEMlpPolicy module{nullptr};
};

Rollout::Rollout(const RolloutOptions& o)
    : options_(o), rng_(o.seed * 1000003ULL + o.explorer_id), episode_return_(o.num_envs, 0.0f),
      episode_len_(o.num_envs, 0) {
  policy_ = std::make_unique<Policy>();
  // Initial values do not matter (the learner's weights replace them) but
  // the draw must not interleave with the learner's seeded construction.
  policy_->module = make_seeded_policy(
      PolicyOptions{o.obs_dim, o.num_actions, o.policy.hidden, o.policy.experts, o.policy.top_k}, o.seed + o.explorer_id);
  policy_->module->eval();
  start_segment();
}

Rollout::~Rollout() = default;

void Rollout::start_segment() {
  const auto T = options_.segment_steps, B = options_.num_envs, D = options_.obs_dim;
  seg_ = Segment{};
  seg_.explorer_id = options_.explorer_id;
  seg_.sequence = sequence_;
  seg_.num_steps = static_cast<std::uint32_t>(T);
  seg_.num_envs = static_cast<std::uint32_t>(B);
  seg_.obs_dim = static_cast<std::uint32_t>(D);
  seg_.observations.reserve(T * B * D);
  seg_.actions.reserve(T * B);
  seg_.behaviour_log_probs.reserve(T * B);
  seg_.rewards.reserve(T * B);
  seg_.terminated.reserve(T * B);
  seg_.truncated.reserve(T * B);
  seg_.policy_versions.reserve(T);
  t_ = 0;
}

const std::vector<std::int64_t>& Rollout::act(const std::vector<float>& observations) {
  const auto B = options_.num_envs, D = options_.obs_dim;
  RLX_REQUIRE(static_cast<std::int64_t>(observations.size()) == B * D, observations.size(), B * D);
  RLX_REQUIRE(!acted_, "act() twice without observe()");
  torch::Tensor logits;
  {
    c10::InferenceMode guard;
    auto obs = torch::from_blob(const_cast<float*>(observations.data()), {B, D}, torch::kFloat32);
    logits = policy_->module->logits(obs);
  }
  Sampled s = sample_categorical(logits, rng_);
  seg_.observations.insert(seg_.observations.end(), observations.begin(), observations.end());
  seg_.actions.insert(seg_.actions.end(), s.actions.begin(), s.actions.end());
  seg_.behaviour_log_probs.insert(seg_.behaviour_log_probs.end(), s.log_probs.begin(), s.log_probs.end());
  seg_.policy_versions.push_back(version_);
  actions_ = std::move(s.actions);
  acted_ = true;
  return actions_;
}

bool Rollout::observe(const EnvStepResultData& r) {
  const auto B = options_.num_envs;
  RLX_REQUIRE(acted_, "observe() without act()");
  RLX_REQUIRE(static_cast<std::int64_t>(r.rewards.size()) == B, r.rewards.size(), B);
  acted_ = false;
  deferred_.clear();
  seg_.rewards.insert(seg_.rewards.end(), r.rewards.begin(), r.rewards.end());
  seg_.terminated.insert(seg_.terminated.end(), r.terminated.begin(), r.terminated.end());
  seg_.truncated.insert(seg_.truncated.end(), r.truncated.begin(), r.truncated.end());
  // The state each time-limit cut was made in: the env's, or (an env that
  // does not say) the state the action was chosen in.
  const auto D = static_cast<std::size_t>(options_.obs_dim);
  for (std::int64_t i = 0; i < B; ++i) {
    if (!r.truncated[i] || r.terminated[i]) continue;
    const float* cut = r.final_observations.size() == static_cast<std::size_t>(B) * D
                           ? r.final_observations.data() + static_cast<std::size_t>(i) * D
                           : seg_.observations.data() + (t_ * static_cast<std::size_t>(B) + static_cast<std::size_t>(i)) * D;
    seg_.truncation_observations.insert(seg_.truncation_observations.end(), cut, cut + D);
  }
  for (std::int64_t i = 0; i < B; ++i) {
    episode_return_[i] += r.rewards[i];
    ++episode_len_[i];
    const bool lost = !r.lost.empty() && r.lost[i];
    if (lost || r.terminated[i] || r.truncated[i]) {
      if (lost) {
        // Cut by the env's failure: not a return to report, and its steps in
        // this segment (back to the episode's start) are masked out.
        ++seg_.lost_episodes;
        const auto back = std::min<std::uint64_t>(t_, episode_len_[i] - 1);
        seg_.mask_episode(static_cast<std::uint32_t>(t_ - back), static_cast<std::uint32_t>(t_),
                          static_cast<std::uint32_t>(i), InfraFailure::env_failed);
      } else {
        seg_.episode_returns.push_back(episode_return_[i]);
        seg_.episode_lengths.push_back(episode_len_[i]);
        if (static_cast<std::int64_t>(r.reward_payloads.size()) == B && !r.reward_payloads[i].empty())
          deferred_.push_back(DeferredEpisode{seg_.sequence, static_cast<std::uint32_t>(t_), static_cast<std::uint32_t>(i),
                                              static_cast<std::uint32_t>(seg_.episode_returns.size() - 1),
                                              r.reward_payloads[i]});
      }
      episode_return_[i] = 0;
      episode_len_[i] = 0;
    }
  }
  ++t_;
  if (static_cast<std::int64_t>(t_) < options_.segment_steps) return false;
  seg_.bootstrap_observations = r.observations;
  return true;
}

Segment Rollout::take_segment() {
  RLX_REQUIRE(static_cast<std::int64_t>(t_) == options_.segment_steps, t_);
  seg_.created_unix_ns = unix_now_ns();
  Segment out = std::move(seg_);
  ++sequence_;
  start_segment();
  return out;
}

std::uint64_t Rollout::newest_in_hand() const {
  std::uint64_t v = 0;
  for (std::uint64_t i = 0; i < t_ && i < seg_.policy_versions.size(); ++i) v = std::max(v, seg_.policy_versions[i]);
  return v;
}

std::uint64_t Rollout::drop_segment() {
  RLX_REQUIRE(!acted_, "drop_segment() between act() and observe()");
  const std::uint64_t dropped = sequence_++;
  deferred_.clear();
  start_segment();
  return dropped;
}

Result<void> Rollout::load_weights(const WeightSetData& w) {
  auto ok = view_weights(*policy_->module, w);  // the set's own bytes: no copy (weights_io.hpp)
  if (!ok) return ok.error();
  version_ = w.version;
  return {};
}

}  // namespace rlx
