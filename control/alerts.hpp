// When a run needs a person: rules over the run's successive reports that
// say what to post to the team's webhook ([alerts]; docs/operating.md).
// A stall (no new policy version for stall_s), an explorer or node lost,
// a loss that is NaN or infinite, failures of the machinery past a rate,
// and the run's end. Each kind at most once per min_interval_s (the end
// always); a condition that persists is said once, again only after it
// cleared. CAF-free; plain data in, alerts out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "control/run_report.hpp"
#include "core/config.hpp"
#include "messages/types.hpp"

namespace rlx {

struct Alert {
  std::string kind;  // stall, member_lost, nan_loss, infra_failures, run_ended
  std::string text;  // one line for people, the run's name first
};

class AlertRules {
 public:
  AlertRules(AlertsConfig config, std::string run_name);

  // Every report, in order (`run.time_s` is the clock).
  std::vector<Alert> check(const MetricsData& learner, const RunCounts& run);
  // The run's end: its outcome ("solved", "failed", ...) and summary.
  Alert ended(const std::string& outcome, const std::string& summary) const;

  std::uint64_t suppressed() const { return suppressed_; }  // held back by min_interval_s

 private:
  void raise(std::vector<Alert>& out, const std::string& kind, double now, std::string text);

  AlertsConfig config_;
  std::string run_;
  bool first_ = true;
  std::uint64_t version_ = 0;
  double version_at_s_ = 0;          // when the policy version last moved
  bool stalled_ = false, non_finite_ = false;
  std::uint64_t explorers_lost_ = 0, nodes_evicted_ = 0, infra_ = 0;
  double infra_at_s_ = 0;
  std::map<std::string, double> last_sent_s_;
  std::uint64_t suppressed_ = 0;
};

}  // namespace rlx
