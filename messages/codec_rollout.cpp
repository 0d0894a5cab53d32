// Segments and rollout records.
#include <cmath>
#include <utility>

#include "messages/codec_detail.hpp"
#include "messages/segment_layout.hpp"

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
  if (tokens)
    for (auto x : tokens->versions) v = std::max(v, x);  // per token: the columns hold their oldest
  return v;
}

std::size_t Segment::truncations() const {
  const auto cut = truncated.span(), ended = terminated.span();
  std::size_t k = 0;
  for (std::size_t i = 0; i < std::min(cut.size(), ended.size()); ++i) k += cut[i] != 0 && ended[i] == 0;
  return k;
}

std::uint64_t Segment::env_steps() const {
  if (!tokens) return std::uint64_t{num_steps} * num_envs;
  std::uint64_t n = 0;
  for (auto l : episode_lengths) n += l;
  return n;
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::trained: return "trained";
    case Verdict::dropped_stale: return "dropped_stale";
    case Verdict::rejected: return "rejected";
  }
  return "unknown";
}

const char* to_string(InfraFailure f) {
  switch (f) {
    case InfraFailure::none: return "none";
    case InfraFailure::sandbox_start: return "sandbox_start";
    case InfraFailure::sandbox_setup: return "sandbox_setup";
    case InfraFailure::overloaded: return "overloaded";
    case InfraFailure::bad_request: return "bad_request";
    case InfraFailure::no_reward_pool: return "no_reward_pool";
    case InfraFailure::reward_timeout: return "reward_timeout";
    case InfraFailure::malformed_reply: return "malformed_reply";
    case InfraFailure::env_failed: return "env_failed";
    case InfraFailure::harness_failed: return "harness_failed";
  }
  return "unknown";
}

void Segment::count_failure(InfraFailure why, std::uint32_t n) {
  infra_failures.resize(kInfraFailureCodes);
  infra_failures[static_cast<std::size_t>(why)] += n;
}

void Segment::mask_episode(std::uint32_t first, std::uint32_t last, std::uint32_t env, InfraFailure why) {
  masked.resize(static_cast<std::size_t>(num_steps) * num_envs);
  for (std::uint32_t t = first; t <= last && t < num_steps; ++t) masked[static_cast<std::size_t>(t) * num_envs + env] = 1;
  masked_rows.push_back(static_cast<std::uint8_t>(why));
  count_failure(why);
}

namespace {

// A segment's bulk, written first (build_bulk_first): its tensors' data
// and its lists of versions, as orphans the structure adopts.
struct SegmentBulk {
  capnp::Orphan<capnp::Data> observations, actions, log_probs, rewards, terminated, truncated, bootstrap, masked,
      truncation_observations, routes, observed;
  capnp::Orphan<capnp::List<std::uint64_t>> policy_versions, token_versions;
};

SegmentBulk segment_bulk(capnp::Orphanage o, const Segment& x) {
  SegmentBulk b;
  b.observations = tensor_orphan(o, x.observations);
  b.actions = tensor_orphan(o, x.actions);
  b.log_probs = tensor_orphan(o, x.behaviour_log_probs);
  b.rewards = tensor_orphan(o, x.rewards);
  b.terminated = tensor_orphan(o, x.terminated);
  b.truncated = tensor_orphan(o, x.truncated);
  b.bootstrap = tensor_orphan(o, x.bootstrap_observations);
  b.policy_versions = u64_orphan(o, x.policy_versions);
  if (!x.masked.empty()) b.masked = tensor_orphan(o, x.masked);
  if (!x.truncation_observations.empty()) b.truncation_observations = tensor_orphan(o, x.truncation_observations);
  if (x.tokens) {
    b.routes = tensor_orphan(o, x.tokens->routes);
    if (!x.tokens->observed.empty()) b.observed = tensor_orphan(o, x.tokens->observed);
    if (!x.tokens->versions.empty()) b.token_versions = u64_orphan(o, x.tokens->versions.span());
  }
  return b;
}

// The bulk's words: each blob rounded up to a word.
std::size_t segment_bulk_words(const Segment& x) {
  const auto words = [](std::size_t bytes) { return (bytes + 7) / 8; };
  std::size_t n = words(x.observations.size() * 4) + x.actions.size() + words(x.behaviour_log_probs.size() * 4) +
                  words(x.rewards.size() * 4) + words(x.terminated.size()) + words(x.truncated.size()) +
                  words(x.bootstrap_observations.size() * 4) + x.policy_versions.size() + words(x.masked.size()) +
                  words(x.truncation_observations.size() * 4);
  if (x.tokens) n += words(x.tokens->routes.size()) + words(x.tokens->observed.size()) + x.tokens->versions.size();
  return n;
}

// Everything else, built after the bulk in zeroed memory: the scalars,
// the tensors' heads adopting their data, the short lists and the texts.
void segment_structure(wire::TrajectorySegment::Builder s, const Segment& x, SegmentBulk& b) {
  const std::uint32_t T = x.num_steps, B = x.num_envs, D = x.obs_dim;
  s.setExplorerId(x.explorer_id);
  s.setSequence(x.sequence);
  s.setNumSteps(T);
  s.setNumEnvs(B);
  set_tensor_adopting<float>(s.initObservations(), {T, B, D}, b.observations);
  set_tensor_adopting<std::int64_t>(s.initActions(), {T, B}, b.actions);
  set_tensor_adopting<float>(s.initBehaviourLogProbs(), {T, B}, b.log_probs);
  set_tensor_adopting<float>(s.initRewards(), {T, B}, b.rewards);
  set_tensor_adopting<std::uint8_t>(s.initTerminated(), {T, B}, b.terminated);
  set_tensor_adopting<std::uint8_t>(s.initTruncated(), {T, B}, b.truncated);
  s.adoptPolicyVersions(kj::mv(b.policy_versions));
  set_tensor_adopting<float>(s.initBootstrapObservations(), {B, D}, b.bootstrap);
  auto r = s.initEpisodeReturns(static_cast<unsigned>(x.episode_returns.size()));
  for (unsigned i = 0; i < x.episode_returns.size(); ++i) r.set(i, x.episode_returns[i]);
  auto l = s.initEpisodeLengths(static_cast<unsigned>(x.episode_lengths.size()));
  for (unsigned i = 0; i < x.episode_lengths.size(); ++i) l.set(i, x.episode_lengths[i]);
  s.setCreatedUnixNs(x.created_unix_ns);
  s.setLostEpisodes(x.lost_episodes);
  if (!x.masked.empty()) set_tensor_adopting<std::uint8_t>(s.initMasked(), {T, B}, b.masked);
  auto mr = s.initMaskedRows(static_cast<unsigned>(x.masked_rows.size()));
  for (unsigned i = 0; i < x.masked_rows.size(); ++i) mr.set(i, x.masked_rows[i]);
  auto inf = s.initInfraFailures(static_cast<unsigned>(x.infra_failures.size()));
  for (unsigned i = 0; i < x.infra_failures.size(); ++i) inf.set(i, x.infra_failures[i]);
  s.setRewardRetries(x.reward_retries);
  s.setSentIndex(x.sent_index);
  s.setSentBase(x.sent_base);
  {
    auto w = s.initWork();
    w.setDecodeSeconds(x.work.decode_s);
    w.setToolSeconds(x.work.tool_s);
    w.setScoreSeconds(x.work.score_s);
    w.setToolCalls(static_cast<std::uint32_t>(std::min<std::uint64_t>(x.work.tool_calls, UINT32_MAX)));
  }
  if (!x.truncation_observations.empty())
    set_tensor_adopting<float>(s.initTruncationObservations(),
                               {static_cast<std::uint32_t>(x.truncation_observations.size() / std::max(D, 1u)), D},
                               b.truncation_observations);
  if (x.tokens) {
    auto k = s.initTokens();
    k.setPromptWidth(x.tokens->prompt_width);
    auto pl = k.initPromptLengths(static_cast<unsigned>(x.tokens->prompt_lengths.size()));
    for (unsigned i = 0; i < pl.size(); ++i) pl.set(i, x.tokens->prompt_lengths[i]);
    set_tensor_adopting<std::uint8_t>(k.initRoutes(), {T, B, x.tokens->route_width}, b.routes);
    k.setGroupSize(x.tokens->group_size);
    auto ids = k.initTaskIds(static_cast<unsigned>(x.tokens->task_ids.size()));
    for (unsigned i = 0; i < ids.size(); ++i) ids.set(i, x.tokens->task_ids[i]);
    if (!x.tokens->hints.empty()) {
      auto hints = k.initHints(static_cast<unsigned>(x.tokens->hints.size()));
      for (unsigned i = 0; i < hints.size(); ++i) hints.set(i, x.tokens->hints[i]);
    }
    if (!x.tokens->observed.empty()) set_tensor_adopting<std::uint8_t>(k.initObserved(), {T, B}, b.observed);
    if (!x.tokens->versions.empty()) k.adoptVersions(kj::mv(b.token_versions));
  }
}

// About the words segment_structure allocates, the Envelope's included:
// its structs, tensors' heads, short lists and texts (a larger structure
// still builds, in a segment of its own).
std::size_t segment_structure_words(const Segment& x, std::string_view sender) {
  std::size_t words = 160 + text_words(sender.size()) + x.episode_returns.size() + x.episode_lengths.size() +
                      x.masked_rows.size() + x.infra_failures.size();
  if (x.tokens) {
    words += x.tokens->prompt_lengths.size();
    for (const auto& id : x.tokens->task_ids) words += text_words(id.size());
    for (const auto& h : x.tokens->hints) words += text_words(h.size());
  }
  return words;
}

// A token segment's rows, checked against the segment's shape.
TokenRows read_tokens(wire::TokenRows::Reader k, const Segment& x, const std::shared_ptr<const void>& keep) {
  const std::uint64_t T = x.num_steps, B = x.num_envs;
  TokenRows t;
  t.prompt_width = k.getPromptWidth();
  if (t.prompt_width == 0 || t.prompt_width >= T) invalid("tokens: promptWidth must be in [1, numSteps)");
  if (k.getPromptLengths().size() != B) invalid("tokens: need one prompt length per row");
  for (auto l : k.getPromptLengths()) {
    if (l == 0 || l > t.prompt_width) invalid("tokens: a prompt length is 0 or above promptWidth");
    t.prompt_lengths.push_back(l);
  }
  auto shape = k.getRoutes().getShape();
  if (shape.size() != 3) invalid("tokens: routes must be rank 3");
  t.route_width = shape[2];  // layers x slots; 0 from a dense model
  t.routes = view_tensor<std::uint8_t>(k.getRoutes(), {T, B, t.route_width}, "routes", keep);
  t.group_size = k.getGroupSize();
  if (t.group_size == 0 || B % t.group_size != 0) invalid("tokens: groupSize must divide the rows");
  if (k.getTaskIds().size() != B) invalid("tokens: need one task id per row");
  for (auto id : k.getTaskIds()) t.task_ids.emplace_back(id.cStr(), id.size());
  if (k.getHints().size() != 0 && k.getHints().size() != B) invalid("tokens: hints need one entry per row, or none");
  for (auto h : k.getHints()) {
    if (h.size() > kMaxHintBytes) invalid("tokens: a hint is longer than 1024 bytes");
    t.hints.emplace_back(h.cStr(), h.size());
  }
  if (x.episode_lengths.size() != B) invalid("tokens: need one episode (completion) per row");
  for (auto l : x.episode_lengths)
    if (l == 0 || t.prompt_width + l > T) invalid("tokens: a completion is empty or runs past numSteps");
  const std::uint64_t P = t.prompt_width;
  if (k.hasObserved()) {
    t.observed = view_tensor<std::uint8_t>(k.getObserved(), {T, B}, "observed", keep);
    if (!all_flags(t.observed.span())) invalid("tokens: observed entries must be 0 or 1");
    // Only completion tokens can be observations: never a prompt's, never past a row's end.
    const std::uint8_t* o = std::as_const(t.observed).data();
    std::uint8_t outside = all_zero({o, P * B}) ? 0 : 1;
    for (std::uint64_t b = 0; b < B; ++b)  // past each row's end (lengths checked above)
      for (std::uint64_t s = P + x.episode_lengths[b]; s < T; ++s) outside |= o[s * B + b];
    if (outside) invalid("tokens: an observed token outside its row's completion");
  }
  if (k.getVersions().size() != 0) {
    if (k.getVersions().size() != T * B) invalid("tokens: versions need one entry per token, or none");
    t.versions = view_u64_list(k.getVersions(), keep);
    // A column's policyVersion is its oldest token's: no token is older.
    if (!none_older(std::as_const(t.versions).span(), x.policy_versions, P, B))
      invalid("tokens: a token's version is older than its column's");
  }
  return t;
}

}  // namespace

Segment codec_detail::read_segment(wire::TrajectorySegment::Reader s, const std::shared_ptr<const void>& keep) {
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
  if (x.obs_dim == 0 && !s.hasTokens()) invalid("observations: obs_dim must be positive");
  if (x.obs_dim != 0 && s.hasTokens()) invalid("tokens: a token segment has no observations");
  x.observations = view_tensor<float>(s.getObservations(), {T, B, x.obs_dim}, "observations", keep);
  x.actions = view_tensor<std::int64_t>(s.getActions(), {T, B}, "actions", keep);
  x.behaviour_log_probs = view_tensor<float>(s.getBehaviourLogProbs(), {T, B}, "behaviourLogProbs", keep);
  x.rewards = view_tensor<float>(s.getRewards(), {T, B}, "rewards", keep);
  x.terminated = view_tensor<std::uint8_t>(s.getTerminated(), {T, B}, "terminated", keep);
  x.truncated = view_tensor<std::uint8_t>(s.getTruncated(), {T, B}, "truncated", keep);
  auto v = s.getPolicyVersions();
  if (v.size() != T) invalid("policyVersions: need one version per step");
  x.policy_versions = read_u64_list(v);
  x.bootstrap_observations = view_tensor<float>(s.getBootstrapObservations(), {B, x.obs_dim}, "bootstrapObservations", keep);
  auto r = s.getEpisodeReturns();
  auto l = s.getEpisodeLengths();
  if (r.size() != l.size()) invalid("episodeReturns and episodeLengths differ in length");
  for (auto e : r) x.episode_returns.push_back(e);
  for (auto e : l) x.episode_lengths.push_back(e);
  x.created_unix_ns = s.getCreatedUnixNs();
  x.lost_episodes = s.getLostEpisodes();
  if (s.hasMasked()) x.masked = view_tensor<std::uint8_t>(s.getMasked(), {T, B}, "masked", keep);
  for (auto r : s.getMaskedRows()) x.masked_rows.push_back(r);
  for (auto n : s.getInfraFailures()) x.infra_failures.push_back(n);
  x.reward_retries = s.getRewardRetries();
  x.sent_index = s.getSentIndex();
  x.sent_base = s.getSentBase();
  if (s.hasWork()) {
    const auto w = s.getWork();
    x.work = SegmentWork{w.getDecodeSeconds(), w.getToolSeconds(), w.getScoreSeconds(), w.getToolCalls()};
  }
  if (s.hasTruncationObservations())
    x.truncation_observations =
        view_tensor<float>(s.getTruncationObservations(), {x.truncations(), x.obs_dim}, "truncationObservations", keep);
  if (s.hasTokens()) x.tokens = read_tokens(s.getTokens(), x, keep);
  check_segment_values(x);
  return x;
}

void codec_detail::check_segment_values(Segment& x) {
  if (!all_flags(x.masked.span())) invalid("masked: entries must be 0 or 1");
  for (auto r : x.masked_rows)
    if (r == 0 || r >= kInfraFailureCodes) invalid("maskedRows: not an InfraFailure code");
  if (!x.masked_rows.empty() && x.masked.empty()) invalid("maskedRows without masked steps");
  // Segments recorded before a code was added carry fewer counts: the
  // missing ones are 0. More than the codes known is not a segment of ours.
  if (x.infra_failures.size() > kInfraFailureCodes) invalid("infraFailures: more counts than InfraFailure codes");
  if (!x.infra_failures.empty()) x.infra_failures.resize(kInfraFailureCodes);
  for (double v : {x.work.decode_s, x.work.tool_s, x.work.score_s})
    if (!(v >= 0) || !std::isfinite(v)) invalid("work: seconds must be finite and not negative");
  if (!all_finite(x.truncation_observations.span())) invalid("truncationObservations: must be finite");
  if (!all_non_positive(x.behaviour_log_probs.span())) invalid("behaviourLogProbs: must be finite and <= 0");
  if (!all_finite(x.observations.span())) invalid("observations: must be finite");
  if (!all_finite(x.rewards.span())) invalid("rewards: must be finite");
}

WireBuffer codec_detail::encode_segment_built(const Segment& x, std::string_view sender) {
  return build_bulk_first(
      sender, [&](capnp::Orphanage o) { return segment_bulk(o, x); },
      [&](auto body, SegmentBulk& bulk) { segment_structure(body.initSegment(), x, bulk); }, segment_bulk_words(x),
      segment_structure_words(x, sender));
}

Result<Segment> codec_detail::decode_segment_general(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<Segment>(buf, options, Which::SEGMENT,
                              [&](auto body) { return read_segment(body.getSegment(), buf.keepalive()); });
}

WireBuffer encode(const Segment& x, std::string_view sender) {
  if (auto fixed = encode_fixed_layout(x, sender)) return std::move(*fixed);
  return encode_segment_built(x, sender);
}

template <>
Result<Segment> decode<Segment>(const WireBuffer& buf, const DecodeOptions& options) {
  if (buf.is_borrowed()) return decode<Segment>(buf.owned(), options);  // its columns view the bytes
  try {
    if (auto x = read_fixed_layout(buf, options)) {
      check_segment_values(*x);
      return std::move(*x);
    }
  } catch (const Invalid& e) {
    return e.error;
  }
  return decode_segment_general(buf, options);
}

}  // namespace rlx
