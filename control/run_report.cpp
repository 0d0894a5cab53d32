#include "control/run_report.hpp"

#include <cmath>

#include <fmt/format.h>

namespace rlx {

void LatencyHistogram::observe(double seconds) {
  std::size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts[i];
  sum_s += seconds;
  ++total;
}

std::string json_number(double x) { return std::isfinite(x) ? fmt::format("{:.6g}", x) : "null"; }

std::string infra_failures_json(const std::vector<std::uint64_t>& by_code) {
  std::string out;
  for (std::size_t code = 1; code < kInfraFailureCodes; ++code)
    out += fmt::format("{}\"{}\":{}", out.empty() ? "" : ",", to_string(static_cast<InfraFailure>(code)),
                       code < by_code.size() ? by_code[code] : 0);
  return "{" + out + "}";
}

std::string strangers_json(const std::map<std::string, StrangerWatch::ByKind>& by_port) {
  std::string out = "{";
  for (const auto& [port, counts] : by_port) {
    out += fmt::format("{}\"{}\":{{", out.size() > 1 ? "," : "", port);
    for (std::size_t k = 0; k < kStrangerKinds; ++k)
      out += fmt::format("{}\"{}\":{}", k ? "," : "", stranger_name(static_cast<Stranger>(k)), counts[k]);
    out += "}";
  }
  return out + "}";
}

std::uint64_t strangers_total(const std::map<std::string, StrangerWatch::ByKind>& by_port) {
  std::uint64_t n = 0;
  for (const auto& [port, counts] : by_port)
    for (auto c : counts) n += c;
  return n;
}

std::string infra_failures_text(const std::vector<std::uint64_t>& by_code) {
  std::string out;
  for (std::size_t code = 1; code < by_code.size() && code < kInfraFailureCodes; ++code)
    if (by_code[code] > 0)
      out += fmt::format("{}{} {}", out.empty() ? "" : ", ", to_string(static_cast<InfraFailure>(code)), by_code[code]);
  return out;
}

std::string metrics_json_line(const MetricsData& m, const RunCounts& r) {
  std::string util;
  for (auto u : m.expert_utilisation) util += (util.empty() ? "" : ",") + json_number(u);
  std::string hist;
  for (auto h : m.lag_histogram) hist += (hist.empty() ? "" : ",") + std::to_string(h);
  const auto& a = r.segments;
  return fmt::format(
      "{{\"time_s\":{},\"env_steps\":{},\"episodes\":{},\"mean_return\":{},\"policy_version\":{},"
      "\"segments_received\":{},\"segments_trained\":{},\"segments_dropped_stale\":{},\"segments_rejected\":{},\"segments_update_failed\":{},\"lag_mean\":{},\"lag_max\":{},"
      "\"lag_histogram\":[{}],\"ratio_mean\":{},\"ratio_max\":{},\"truncated_fraction\":{},\"policy_loss\":{},"
      "\"value_loss\":{},\"entropy\":{},\"load_balance_loss\":{},\"expert_utilisation\":[{}],\"updates\":{},"
      "\"weight_swap_mean_us\":{},\"explorers\":{},\"explorers_lost\":{},\"episodes_lost\":{},\"nodes\":{},"
      "\"joins_refused\":{},\"nodes_evicted\":{},\"segments_produced\":{},\"segments_lost\":{},"
      "\"segments_in_flight\":{},\"segments_vanished\":{},\"reward_workers\":{},\"explorers_retired\":{},\"learner_busy_s\":{},"
      "\"autoscale_changes\":{},\"explorers_rejoined\":{},\"route_mismatch\":{},\"stale_tokens\":{},"
      "\"hint_kl\":{},\"reference_kl\":{},\"sampler_mismatch\":{},\"hinted_rows\":{},\"skipped_rows\":{},\"reward_retries\":{},\"rows_masked\":{},"
      "\"infra_failures\":{},\"decode_s\":{},\"tool_s\":{},\"score_s\":{},\"tool_calls\":{},\"policy_tokens\":{},\"segments_unrecorded\":{},\"strangers\":{},\"strangers_total\":{},\"rss_mb\":{},"
      "\"reward_answers\":{},\"reward_latency_mean_s\":{}{}{}}}\n",
      json_number(r.time_s), m.env_steps, m.episodes, json_number(m.mean_return), m.policy_version,
      m.segments_received, m.segments_trained, m.segments_dropped_stale, m.segments_rejected, m.segments_update_failed,
      json_number(m.lag_mean),
      m.lag_max, hist, json_number(m.ratio_mean), json_number(m.ratio_max), json_number(m.truncated_fraction),
      json_number(m.policy_loss), json_number(m.value_loss), json_number(m.entropy), json_number(m.load_balance_loss),
      util, m.updates, json_number(r.weight_swap_mean_us), r.explorers, r.explorers_lost, m.episodes_lost, r.nodes,
      r.joins_refused, r.nodes_evicted, a.produced, a.lost, a.in_flight, a.vanished, r.reward_workers, r.explorers_retired,
      json_number(m.busy_s), r.autoscale_changes, r.explorers_rejoined, json_number(m.route_mismatch), m.stale_tokens,
      json_number(m.hint_kl), json_number(m.reference_kl), json_number(m.sampler_mismatch), m.hinted_rows, m.skipped_rows, m.reward_retries, m.rows_masked,
      infra_failures_json(m.infra_failures), json_number(m.decode_s), json_number(m.tool_s), json_number(m.score_s),
      m.tool_calls, m.policy_tokens, r.segments_unrecorded, strangers_json(r.strangers),
      strangers_total(r.strangers), r.rss_mb, r.reward_latency.total,
      json_number(r.reward_latency.total ? r.reward_latency.sum_s / static_cast<double>(r.reward_latency.total) : 0.0),
      r.eval.any ? fmt::format(",\"eval_version\":{},\"pass_at_1\":{},\"eval_mean_score\":{},\"eval_tasks\":{}",
                               r.eval.version, json_number(r.eval.pass_at_1), json_number(r.eval.mean_score),
                               r.eval.tasks)
                 : std::string(),
      r.gateway ? ",\"gateway\":" + gateway_json(*r.gateway) : std::string());
}

std::string gateway_json(const GatewayCounts& g) {
  return fmt::format(
      "{{\"turns\":{},\"turns_done\":{},\"turns_failed\":{},\"turns_cancelled\":{},\"busy\":{},\"sessions_opened\":{},"
      "\"sessions_rewarded\":{},\"sessions_failed\":{},\"sessions_lost\":{},\"prefix_mismatch\":{},\"eos_dropped\":{},"
      "\"groups_ready\":{},\"groups_dropped\":{},\"trajectories_taken\":{}}}",
      g.turns, g.turns_done, g.turns_failed, g.turns_cancelled, g.busy, g.sessions_opened, g.sessions_rewarded,
      g.sessions_failed, g.sessions_lost, g.prefix_mismatch, g.eos_dropped, g.groups_ready, g.groups_dropped,
      g.trajectories_taken);
}

Status make_status(const MetricsData& m, const RunCounts& r, double steps_per_s) {
  Status s;
  s.time_s = r.time_s;
  s.env_steps = m.env_steps;
  s.steps_per_s = steps_per_s;
  s.episodes = m.episodes;
  s.mean_return = m.mean_return;
  s.policy_version = m.policy_version;
  s.lag_mean = m.lag_mean;
  s.lag_max = m.lag_max;
  s.trained = m.segments_trained;
  s.dropped_stale = m.segments_dropped_stale;
  s.rejected = m.segments_rejected;
  s.lost = r.segments.lost;
  s.vanished = r.segments.vanished;
  s.explorers = r.explorers;
  s.reward_workers = r.reward_workers;
  s.nodes = r.nodes;
  s.strangers = strangers_total(r.strangers);
  s.reward_retries = m.reward_retries;
  s.rows_masked = m.rows_masked;
  s.infra_failures = infra_failures_text(m.infra_failures);
  if (r.eval.any) {
    s.eval_version = r.eval.version;
    s.pass_at_1 = r.eval.pass_at_1;
  }
  return s;
}

}  // namespace rlx
