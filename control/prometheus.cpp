#include "control/prometheus.hpp"

#include <cmath>

#include <fmt/format.h>

namespace rlx {

std::string prometheus_label(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", x);  // the shortest text that reads back as x
}

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string& out, const std::string& labels, const std::string& name, const char* type, const char* help)
      : out_(out), labels_(labels), name_("rlx_" + name) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help, name_, type);
  }
  // A sample; `extra` is more labels ("explorer=\"3\""), `suffix` e.g. "_bucket".
  Family& sample(double value, const std::string& extra = {}, const char* suffix = "") {
    out_ += fmt::format("{}{}{{{}{}{}}} {}\n", name_, suffix, labels_, extra.empty() ? "" : ",", extra, number(value));
    return *this;
  }

 private:
  std::string& out_;
  const std::string& labels_;
  std::string name_;
};

}  // namespace

std::string prometheus_text(const MetricsData& m, const RunCounts& r, const std::string& run_name) {
  std::string out;
  const std::string labels = fmt::format("run=\"{}\"", prometheus_label(run_name));
  auto counter = [&](const std::string& name, double v, const char* help) {
    Family(out, labels, name + "_total", "counter", help).sample(v);
  };
  auto gauge = [&](const std::string& name, double v, const char* help) {
    Family(out, labels, name, "gauge", help).sample(v);
  };
  const auto d = [](auto x) { return static_cast<double>(x); };

  gauge("run_seconds", r.time_s, "Seconds since the run started.");
  counter("env_steps", d(m.env_steps), "Env steps (token policies: tokens placed) in the segments the learner received.");
  counter("episodes", d(m.episodes), "Episodes ended in the segments the learner received.");
  gauge("mean_return", m.mean_return, "Mean return of the latest episodes (NaN before the first).");
  gauge("policy_version", d(m.policy_version), "The newest policy version the learner published.");
  counter("updates", d(m.updates), "Learner updates.");
  counter("segments_received", d(m.segments_received), "Segments the learner received.");
  counter("segments_trained", d(m.segments_trained), "Segments trained on.");
  counter("segments_dropped_stale", d(m.segments_dropped_stale), "Segments dropped for lagging past max_staleness.");
  counter("segments_rejected", d(m.segments_rejected), "Segments rejected as malformed.");
  counter("segments_update_failed", d(m.segments_update_failed), "Segments admitted to an update that failed.");
  counter("segments_produced", d(r.segments.produced), "Segments the explorers said they sent.");
  counter("segments_lost", d(r.segments.lost), "Segments of explorers that died, never received.");
  gauge("segments_in_flight", d(r.segments.in_flight), "Segments sent and not yet received.");
  counter("segments_vanished", d(r.segments.vanished), "Segments sent and never received though sender and learner lived.");
  counter("segments_unrecorded", d(r.segments_unrecorded), "Records the rollout log failed to take.");
  {
    Family f(out, labels, "segments_received_by_explorer_total", "counter",
             "Segments the learner received, by explorer and the node it ran on.");
    for (const auto& [explorer, n] : m.segments_by_explorer) {
      const auto node = r.explorer_nodes.find(explorer);
      f.sample(d(n), fmt::format("explorer=\"{}\",node=\"{}\"", explorer,
                                 prometheus_label(node == r.explorer_nodes.end() ? std::string() : node->second)));
    }
  }
  gauge("lag_mean", m.lag_mean, "Mean lag (versions) of the segments accepted over the last report interval.");
  gauge("lag_max", d(m.lag_max), "Largest lag (versions) accepted over the last report interval.");
  {
    // Accepted env steps by lag, cumulative buckets; the last entry holds
    // every lag at or past max_staleness, so it is also +Inf.
    Family f(out, labels, "lag_versions", "histogram", "Accepted env steps by the lag (versions) of their segment.");
    double below = 0, sum = 0;
    for (std::size_t lag = 0; lag < m.lag_histogram.size(); ++lag) {
      below += d(m.lag_histogram[lag]);
      sum += d(lag) * d(m.lag_histogram[lag]);
      f.sample(below, fmt::format("le=\"{}\"", lag), "_bucket");
    }
    f.sample(below, "le=\"+Inf\"", "_bucket").sample(sum, {}, "_sum").sample(below, {}, "_count");
  }
  gauge("ratio_mean", m.ratio_mean, "Mean importance ratio of the last update.");
  gauge("ratio_max", m.ratio_max, "Largest importance ratio of the last update.");
  gauge("truncated_fraction", m.truncated_fraction, "Fraction of importance weights truncated in the last update.");
  gauge("policy_loss", m.policy_loss, "Policy loss of the last update.");
  gauge("value_loss", m.value_loss, "Value loss of the last update.");
  gauge("entropy", m.entropy, "Policy entropy of the last update.");
  gauge("load_balance_loss", m.load_balance_loss, "MoE load-balancing loss of the last update.");
  {
    Family f(out, labels, "expert_utilisation", "gauge", "Share of routed tokens each expert took in the last update.");
    for (std::size_t e = 0; e < m.expert_utilisation.size(); ++e)
      f.sample(m.expert_utilisation[e], fmt::format("expert=\"{}\"", e));
  }
  gauge("route_mismatch", m.route_mismatch, "Token policy: share of routes the learner chose differently (last update).");
  gauge("hint_kl", m.hint_kl, "Token policy: hint distillation KL (last update).");
  gauge("reference_kl", m.reference_kl, "Token policy: KL to the run's start weights per trained token (last update).");
  gauge("sampler_mismatch", m.sampler_mismatch,
        "Token policy: mean |log p learner - log p sampler| over tokens sampled at the learner's version "
        "(last update).");
  counter("stale_tokens", d(m.stale_tokens), "Token policy: tokens masked for lagging past the bound.");
  counter("hinted_rows", d(m.hinted_rows), "Token policy: rows trained with a hint.");
  counter("skipped_rows", d(m.skipped_rows), "Token policy: rows skipped (a group whose rewards were all equal).");
  counter("learner_busy_seconds", m.busy_s, "Seconds the learner spent on segments and updates.");
  gauge("weight_swap_mean_seconds", r.weight_swap_mean_us * 1e-6, "Mean time explorers took to swap in new weights.");
  auto latency = [&](const std::string& name, const LatencyHistogram& h, const char* help) {
    Family f(out, labels, name, "histogram", help);
    double below = 0;
    for (std::size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
      below += d(h.counts[i]);
      f.sample(below, fmt::format("le=\"{}\"", number(LatencyHistogram::kBounds[i])), "_bucket");
    }
    f.sample(d(h.total), "le=\"+Inf\"", "_bucket").sample(h.sum_s, {}, "_sum").sample(d(h.total), {}, "_count");
  };
  latency("weight_swap_seconds", r.weight_swaps, "Time each explorer took to swap in new weights.");
  latency("reward_seconds", r.reward_latency,
          "Time from an explorer's reward request to a reward worker's answer (answered requests; in-process "
          "scoring is in score_seconds).");
  counter("episodes_lost", d(m.episodes_lost), "Episodes cut by environment failures (not in the returns).");
  counter("reward_retries", d(m.reward_retries), "Reward requests asked again.");
  counter("rows_masked", d(m.rows_masked), "Episodes masked out for want of an outcome (an infrastructure failure).");
  if (r.gateway) {
    const auto& g = *r.gateway;
    counter("gateway_turns", d(g.turns), "Gateway: completions queued for the explorers.");
    counter("gateway_turns_failed", d(g.turns_failed), "Gateway: turns that got no completion (the run ended, an explorer stopped).");
    counter("gateway_turns_cancelled", d(g.turns_cancelled), "Gateway: turns whose client went away.");
    counter("gateway_busy", d(g.busy), "Gateway: turns refused for a full queue.");
    counter("gateway_sessions_opened", d(g.sessions_opened), "Gateway: sessions opened.");
    counter("gateway_sessions_rewarded", d(g.sessions_rewarded), "Gateway: sessions closed with a reward.");
    counter("gateway_sessions_failed", d(g.sessions_failed), "Gateway: sessions whose harness reported its machinery failed (masked).");
    counter("gateway_sessions_lost", d(g.sessions_lost), "Gateway: sessions idle past the timeout (never trained).");
    counter("gateway_prefix_mismatch", d(g.prefix_mismatch), "Gateway: turns that rewrote their session's history.");
    counter("gateway_groups_dropped", d(g.groups_dropped), "Gateway: groups dropped for a lost session.");
  }
  {
    Family f(out, labels, "infra_failures_total", "counter", "Failures of the machinery met, by reason.");
    for (std::size_t code = 1; code < kInfraFailureCodes; ++code)
      f.sample(code < m.infra_failures.size() ? d(m.infra_failures[code]) : 0,
               fmt::format("reason=\"{}\"", to_string(static_cast<InfraFailure>(code))));
  }
  counter("decode_seconds", m.decode_s, "Seconds explorers spent decoding (summed over the segments received).");
  counter("tool_seconds", m.tool_s, "Seconds agent tools ran (summed over the segments received).");
  counter("score_seconds", m.score_s, "Seconds scoring took (summed over the segments received).");
  counter("tool_calls", d(m.tool_calls), "Agent tool calls.");
  counter("policy_tokens", d(m.policy_tokens), "Tokens the policy sampled.");
  gauge("explorers", d(r.explorers), "Explorers live now.");
  {
    Family f(out, labels, "explorers_by_node", "gauge", "Explorers live now, by node.");
    for (const auto& [node, n] : r.explorers_by_node) f.sample(d(n), fmt::format("node=\"{}\"", prometheus_label(node)));
  }
  counter("explorers_lost", d(r.explorers_lost), "Explorers that died or were evicted.");
  counter("explorers_retired", d(r.explorers_retired), "Explorers drained by a scale-down.");
  counter("explorers_rejoined", d(r.explorers_rejoined), "Explorers that outlived a dead head and rejoined.");
  gauge("reward_workers", d(r.reward_workers), "Reward workers live now.");
  gauge("nodes", d(r.nodes), "Processes in the cluster (the head counts).");
  counter("joins_refused", d(r.joins_refused), "Joins the head refused.");
  counter("nodes_evicted", d(r.nodes_evicted), "Nodes evicted for missing heartbeats.");
  counter("autoscale_changes", d(r.autoscale_changes), "Changes the autoscaler made.");
  {
    Family f(out, labels, "strangers_total", "counter",
             "Connections to the head's ports that never became peers, by port and kind.");
    for (const auto& [port, counts] : r.strangers)
      for (std::size_t k = 0; k < kStrangerKinds; ++k)
        f.sample(d(counts[k]), fmt::format("port=\"{}\",kind=\"{}\"", prometheus_label(port),
                                           stranger_name(static_cast<Stranger>(k))));
  }
  gauge("resident_memory_bytes", d(r.rss_mb) * 1024 * 1024, "The head process's resident memory.");
  if (r.eval.any) {
    gauge("eval_version", d(r.eval.version), "The policy version the newest held-out evaluation scored.");
    gauge("pass_at_1", r.eval.pass_at_1, "Held-out pass@1 of the newest evaluation.");
    gauge("eval_mean_score", r.eval.mean_score, "Held-out mean score of the newest evaluation.");
    gauge("eval_tasks", d(r.eval.tasks), "Held-out tasks the newest evaluation scored.");
  }
  return out;
}

}  // namespace rlx
