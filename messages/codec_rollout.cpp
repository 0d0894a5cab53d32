// Segments and rollout records.
#include <cmath>

#include "messages/codec_detail.hpp"

namespace rlx {
using namespace codec_detail;

std::uint64_t Segment::oldest_version() const {
  std::uint64_t v = UINT64_MAX;
  for (auto x : policy_versions) v = std::min(v, x);
  return policy_versions.empty() ? 0 : v;
}

std::uint64_t Segment::newest_version() const {
  std::uint64_t v = 0;
  for (auto x : policy_versions) v = std::max(v, x);
  return v;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::trained: return "trained";
    case Verdict::dropped_stale: return "dropped_stale";
    case Verdict::rejected: return "rejected";
  }
  return "unknown";
}

namespace {

void fill_segment(wire::TrajectorySegment::Builder s, const Segment& x) {
  const std::uint32_t T = x.num_steps, B = x.num_envs, D = x.obs_dim;
  s.setExplorerId(x.explorer_id);
  s.setSequence(x.sequence);
  s.setNumSteps(T);
  s.setNumEnvs(B);
  set_tensor(s.initObservations(), {T, B, D}, x.observations);
  set_tensor(s.initActions(), {T, B}, x.actions);
  set_tensor(s.initBehaviourLogProbs(), {T, B}, x.behaviour_log_probs);
  set_tensor(s.initRewards(), {T, B}, x.rewards);
  set_tensor(s.initTerminated(), {T, B}, x.terminated);
  set_tensor(s.initTruncated(), {T, B}, x.truncated);
  auto v = s.initPolicyVersions(static_cast<unsigned>(x.policy_versions.size()));
  for (unsigned i = 0; i < x.policy_versions.size(); ++i) v.set(i, x.policy_versions[i]);
  set_tensor(s.initBootstrapObservations(), {B, D}, x.bootstrap_observations);
  auto r = s.initEpisodeReturns(static_cast<unsigned>(x.episode_returns.size()));
  for (unsigned i = 0; i < x.episode_returns.size(); ++i) r.set(i, x.episode_returns[i]);
  auto l = s.initEpisodeLengths(static_cast<unsigned>(x.episode_lengths.size()));
  for (unsigned i = 0; i < x.episode_lengths.size(); ++i) l.set(i, x.episode_lengths[i]);
  s.setCreatedUnixNs(x.created_unix_ns);
  s.setLostEpisodes(x.lost_episodes);
}

}  // namespace

Segment codec_detail::read_segment(wire::TrajectorySegment::Reader s) {
  Segment x;
  x.explorer_id = s.getExplorerId();
  x.sequence = s.getSequence();
  x.num_steps = s.getNumSteps();
  x.num_envs = s.getNumEnvs();
  const std::uint64_t T = x.num_steps, B = x.num_envs;
  if (T == 0 || B == 0) invalid("segment: numSteps and numEnvs must be positive");
  auto obs_shape = s.getObservations().getShape();
  if (obs_shape.size() != 3) invalid("observations: rank must be 3");
  x.obs_dim = obs_shape[2];
  if (x.obs_dim == 0) invalid("observations: obs_dim must be positive");
  x.observations = read_tensor<float>(s.getObservations(), {T, B, x.obs_dim}, "observations");
  x.actions = read_tensor<std::int64_t>(s.getActions(), {T, B}, "actions");
  x.behaviour_log_probs = read_tensor<float>(s.getBehaviourLogProbs(), {T, B}, "behaviourLogProbs");
  x.rewards = read_tensor<float>(s.getRewards(), {T, B}, "rewards");
  x.terminated = read_tensor<std::uint8_t>(s.getTerminated(), {T, B}, "terminated");
  x.truncated = read_tensor<std::uint8_t>(s.getTruncated(), {T, B}, "truncated");
  auto v = s.getPolicyVersions();
  if (v.size() != T) invalid("policyVersions: need one version per step");
  for (auto e : v) x.policy_versions.push_back(e);
  x.bootstrap_observations = read_tensor<float>(s.getBootstrapObservations(), {B, x.obs_dim}, "bootstrapObservations");
  auto r = s.getEpisodeReturns();
  auto l = s.getEpisodeLengths();
  if (r.size() != l.size()) invalid("episodeReturns and episodeLengths differ in length");
  for (auto e : r) x.episode_returns.push_back(e);
  for (auto e : l) x.episode_lengths.push_back(e);
  x.created_unix_ns = s.getCreatedUnixNs();
  x.lost_episodes = s.getLostEpisodes();
  for (float f : x.behaviour_log_probs)
    if (!(f <= 0.0f)) invalid("behaviourLogProbs: must be finite and <= 0");
  for (float f : x.observations)
    if (!std::isfinite(f)) invalid("observations: must be finite");
  for (float f : x.rewards)
    if (!std::isfinite(f)) invalid("rewards: must be finite");
  return x;
}

WireBuffer encode(const Segment& x, std::string_view sender) {
  const std::size_t bytes = x.observations.size() * 4 + x.actions.size() * 8 + x.behaviour_log_probs.size() * 4 +
                            x.rewards.size() * 4 + x.terminated.size() * 2 + x.policy_versions.size() * 8 +
                            x.bootstrap_observations.size() * 4 + x.episode_returns.size() * 8;
  return build(sender, [&](auto body) { fill_segment(body.initSegment(), x); }, bytes / 8 + 128);
}

template <>
Result<Segment> decode<Segment>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<Segment>(buf, options, Which::SEGMENT, [](auto body) { return read_segment(body.getSegment()); });
}

}  // namespace rlx
