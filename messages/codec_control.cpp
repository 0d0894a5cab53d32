// Membership, metrics and scaling.
#include "messages/codec_detail.hpp"

namespace rlx {
using namespace codec_detail;

const char* to_string(Role r) {
  static const char* names[] = {"learner", "weight_store", "explorer", "env", "reward", "recorder", "evaluator"};
  auto i = static_cast<std::size_t>(r);
  return i < std::size(names) ? names[i] : "unknown";
}

namespace {
Role read_role(wire::Role r) {
  if (static_cast<unsigned>(r) > static_cast<unsigned>(Role::evaluator)) invalid("role: unknown value");
  return static_cast<Role>(r);
}
}  // namespace

WireBuffer encode(const JoinData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto j = body.initJoin();
    j.setRole(static_cast<wire::Role>(x.role));
    j.setNode(kj::StringPtr(x.node.c_str()));
    j.setMemberId(x.member_id);
    j.setAuthToken(kj::arrayPtr(reinterpret_cast<const kj::byte*>(x.auth_token.data()), x.auth_token.size()));
    j.setFirstEnvId(x.first_env_id);
    j.setNumEnvs(x.num_envs);
    j.setRejoined(x.rejoined);
    j.setProduced(x.produced);
    j.setKept(x.kept);
  });
}

template <>
Result<JoinData> decode<JoinData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<JoinData>(buf, options, Which::JOIN, [](auto body) {
    auto j = body.getJoin();
    JoinData x;
    x.role = read_role(j.getRole());
    x.node = j.getNode().cStr();
    x.member_id = j.getMemberId();
    auto t = j.getAuthToken();
    x.auth_token.assign(reinterpret_cast<const char*>(t.begin()), t.size());
    x.first_env_id = j.getFirstEnvId();
    x.num_envs = j.getNumEnvs();
    x.rejoined = j.getRejoined();
    x.produced = j.getProduced();
    x.kept = j.getKept();
    return x;
  });
}

WireBuffer encode(const LeaveData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto l = body.initLeave();
    l.setRole(static_cast<wire::Role>(x.role));
    l.setMemberId(x.member_id);
    l.setReason(kj::StringPtr(x.reason.c_str()));
    l.setSent(x.sent);
  });
}

template <>
Result<LeaveData> decode<LeaveData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<LeaveData>(buf, options, Which::LEAVE, [](auto body) {
    auto l = body.getLeave();
    return LeaveData{read_role(l.getRole()), l.getMemberId(), l.getReason().cStr(), l.getSent()};
  });
}

WireBuffer encode(const HeartbeatData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto h = body.initHeartbeat();
    h.setRole(static_cast<wire::Role>(x.role));
    h.setMemberId(x.member_id);
    h.setSentUnixNs(x.sent_unix_ns);
  });
}

template <>
Result<HeartbeatData> decode<HeartbeatData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<HeartbeatData>(buf, options, Which::HEARTBEAT, [](auto body) {
    auto h = body.getHeartbeat();
    return HeartbeatData{read_role(h.getRole()), h.getMemberId(), h.getSentUnixNs()};
  });
}

WireBuffer encode(const MetricsData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto m = body.initMetrics();
    m.setEnvSteps(x.env_steps);
    m.setEpisodes(x.episodes);
    m.setMeanReturn(x.mean_return);
    m.setPolicyVersion(x.policy_version);
    m.setSegmentsReceived(x.segments_received);
    m.setSegmentsTrained(x.segments_trained);
    m.setSegmentsDroppedStale(x.segments_dropped_stale);
    m.setSegmentsRejected(x.segments_rejected);
    m.setLagMean(x.lag_mean);
    m.setLagMax(x.lag_max);
    auto h = m.initLagHistogram(static_cast<unsigned>(x.lag_histogram.size()));
    for (unsigned i = 0; i < x.lag_histogram.size(); ++i) h.set(i, x.lag_histogram[i]);
    m.setRatioMean(x.ratio_mean);
    m.setRatioMax(x.ratio_max);
    m.setTruncatedFraction(x.truncated_fraction);
    m.setPolicyLoss(x.policy_loss);
    m.setValueLoss(x.value_loss);
    m.setEntropy(x.entropy);
    m.setLoadBalanceLoss(x.load_balance_loss);
    m.setRouteMismatch(x.route_mismatch);
    m.setStaleTokens(x.stale_tokens);
    m.setHintKl(x.hint_kl);
    m.setHintedRows(x.hinted_rows);
    m.setSkippedRows(x.skipped_rows);
    m.setRewardRetries(x.reward_retries);
    m.setSegmentsUpdateFailed(x.segments_update_failed);
    m.setRowsMasked(x.rows_masked);
    auto f = m.initInfraFailures(static_cast<unsigned>(x.infra_failures.size()));
    for (unsigned i = 0; i < x.infra_failures.size(); ++i) f.set(i, x.infra_failures[i]);
    auto u = m.initExpertUtilisation(static_cast<unsigned>(x.expert_utilisation.size()));
    for (unsigned i = 0; i < x.expert_utilisation.size(); ++i) u.set(i, x.expert_utilisation[i]);
    m.setUpdates(x.updates);
    m.setWeightSwapMeanUs(x.weight_swap_mean_us);
    m.setEpisodesLost(x.episodes_lost);
    m.setDecodeSeconds(x.decode_s);
    m.setToolSeconds(x.tool_s);
    m.setScoreSeconds(x.score_s);
    m.setToolCalls(x.tool_calls);
    m.setPolicyTokens(x.policy_tokens);
    m.setReferenceKl(x.reference_kl);
    m.setSamplerMismatch(x.sampler_mismatch);
    m.setBusySeconds(x.busy_s);
    auto by = m.initSegmentsByExplorer(static_cast<unsigned>(x.segments_by_explorer.size()));
    for (unsigned i = 0; i < x.segments_by_explorer.size(); ++i) {
      by[i].setExplorer(x.segments_by_explorer[i].first);
      by[i].setSegments(x.segments_by_explorer[i].second);
    }
    auto arr = m.initArrivalsByExplorer(static_cast<unsigned>(x.arrivals_by_explorer.size()));
    for (unsigned i = 0; i < x.arrivals_by_explorer.size(); ++i) {
      arr[i].setExplorer(x.arrivals_by_explorer[i].explorer);
      arr[i].setAccounted(x.arrivals_by_explorer[i].accounted);
      arr[i].setVanished(x.arrivals_by_explorer[i].vanished);
    }
  });
}

template <>
Result<MetricsData> decode<MetricsData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<MetricsData>(buf, options, Which::METRICS, [](auto body) {
    auto m = body.getMetrics();
    MetricsData x;
    x.env_steps = m.getEnvSteps();
    x.episodes = m.getEpisodes();
    x.mean_return = m.getMeanReturn();
    x.policy_version = m.getPolicyVersion();
    x.segments_received = m.getSegmentsReceived();
    x.segments_trained = m.getSegmentsTrained();
    x.segments_dropped_stale = m.getSegmentsDroppedStale();
    x.segments_rejected = m.getSegmentsRejected();
    x.lag_mean = m.getLagMean();
    x.lag_max = m.getLagMax();
    for (auto v : m.getLagHistogram()) x.lag_histogram.push_back(v);
    x.ratio_mean = m.getRatioMean();
    x.ratio_max = m.getRatioMax();
    x.truncated_fraction = m.getTruncatedFraction();
    x.policy_loss = m.getPolicyLoss();
    x.value_loss = m.getValueLoss();
    x.entropy = m.getEntropy();
    x.load_balance_loss = m.getLoadBalanceLoss();
    x.route_mismatch = m.getRouteMismatch();
    x.stale_tokens = m.getStaleTokens();
    x.hint_kl = m.getHintKl();
    x.hinted_rows = m.getHintedRows();
    x.skipped_rows = m.getSkippedRows();
    x.reward_retries = m.getRewardRetries();
    x.segments_update_failed = m.getSegmentsUpdateFailed();
    x.rows_masked = m.getRowsMasked();
    if (m.getInfraFailures().size() > kInfraFailureCodes) invalid("infraFailures: more codes than there are");
    for (auto v : m.getInfraFailures()) x.infra_failures.push_back(v);
    for (auto v : m.getExpertUtilisation()) x.expert_utilisation.push_back(v);
    x.updates = m.getUpdates();
    x.weight_swap_mean_us = m.getWeightSwapMeanUs();
    x.episodes_lost = m.getEpisodesLost();
    x.busy_s = m.getBusySeconds();
    x.decode_s = m.getDecodeSeconds();
    x.tool_s = m.getToolSeconds();
    x.score_s = m.getScoreSeconds();
    x.tool_calls = m.getToolCalls();
    x.policy_tokens = m.getPolicyTokens();
    x.reference_kl = m.getReferenceKl();
    x.sampler_mismatch = m.getSamplerMismatch();
    for (auto e : m.getSegmentsByExplorer()) x.segments_by_explorer.emplace_back(e.getExplorer(), e.getSegments());
    for (auto e : m.getArrivalsByExplorer())
      x.arrivals_by_explorer.push_back({e.getExplorer(), e.getAccounted(), e.getVanished()});
    return x;
  });
}

WireBuffer encode(const ScaleCommandData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto s = body.initScale();
    s.setExplorers(x.explorers);
    s.setRewards(x.rewards);
    s.setNode(kj::StringPtr(x.node.c_str()));
  });
}

template <>
Result<ScaleCommandData> decode<ScaleCommandData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<ScaleCommandData>(buf, options, Which::SCALE, [](auto body) {
    auto s = body.getScale();
    if (s.getExplorers() < -1 || s.getRewards() < -1) invalid("scale: counts must be >= -1");
    return ScaleCommandData{s.getExplorers(), s.getRewards(), s.getNode().cStr()};
  });
}

}  // namespace rlx
