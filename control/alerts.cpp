#include "control/alerts.hpp"

#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace rlx {

AlertRules::AlertRules(AlertsConfig config, std::string run_name)
    : config_(std::move(config)), run_(std::move(run_name)) {}

void AlertRules::raise(std::vector<Alert>& out, const std::string& kind, double now, std::string text) {
  auto last = last_sent_s_.find(kind);
  if (last != last_sent_s_.end() && now - last->second < config_.min_interval_s) {
    ++suppressed_;
    return;
  }
  last_sent_s_[kind] = now;
  out.push_back(Alert{kind, fmt::format("rlx run '{}': {}", run_, text)});
}

std::vector<Alert> AlertRules::check(const MetricsData& m, const RunCounts& r) {
  std::vector<Alert> out;
  const double now = r.time_s;
  const std::uint64_t infra = std::accumulate(m.infra_failures.begin(), m.infra_failures.end(), std::uint64_t{0});
  if (first_) {
    // Counts a resumed run starts with are not news.
    first_ = false;
    version_ = m.policy_version;
    version_at_s_ = now;
    explorers_lost_ = r.explorers_lost;
    nodes_evicted_ = r.nodes_evicted;
    infra_ = infra;
    infra_at_s_ = now;
    return out;
  }
  if (m.policy_version != version_) {
    version_ = m.policy_version;
    version_at_s_ = now;
    stalled_ = false;
  } else if (config_.stall_s > 0 && !stalled_ && now - version_at_s_ >= config_.stall_s) {
    stalled_ = true;
    raise(out, "stall", now,
          fmt::format("stalled: no new policy version for {:.0f} s (still v{}; {} explorers, {} segments in flight)",
                      now - version_at_s_, version_, r.explorers, r.segments.in_flight));
  }
  if (r.explorers_lost > explorers_lost_ || r.nodes_evicted > nodes_evicted_) {
    raise(out, "member_lost", now,
          fmt::format("lost {} explorer(s) and {} node(s) since the last report ({} explorers and {} nodes live)",
                      r.explorers_lost - std::min(r.explorers_lost, explorers_lost_),
                      r.nodes_evicted - std::min(r.nodes_evicted, nodes_evicted_), r.explorers, r.nodes));
  }
  explorers_lost_ = std::max(explorers_lost_, r.explorers_lost);
  nodes_evicted_ = std::max(nodes_evicted_, r.nodes_evicted);
  const bool finite = std::isfinite(m.policy_loss) && std::isfinite(m.value_loss) && std::isfinite(m.entropy);
  if (!finite && !non_finite_)
    raise(out, "nan_loss", now,
          fmt::format("a loss is not finite at v{} (policy {}, value {}, entropy {})", m.policy_version,
                      m.policy_loss, m.value_loss, m.entropy));
  non_finite_ = !finite;
  // The rate over at least a minute, so one bad report is not a rate.
  if (now - infra_at_s_ >= 60 || infra < infra_) {
    const double per_min = infra >= infra_ ? static_cast<double>(infra - infra_) * 60 / (now - infra_at_s_) : 0;
    if (config_.infra_failures_per_min > 0 && per_min > config_.infra_failures_per_min)
      raise(out, "infra_failures", now,
            fmt::format("{:.1f} failures of the machinery per minute (over {}/min): {}", per_min,
                        config_.infra_failures_per_min, infra_failures_text(m.infra_failures)));
    infra_ = infra;
    infra_at_s_ = now;
  }
  return out;
}

Alert AlertRules::ended(const std::string& outcome, const std::string& summary) const {
  return Alert{"run_ended", fmt::format("rlx run '{}' ended: {}: {}", run_, outcome, summary)};
}

}  // namespace rlx
