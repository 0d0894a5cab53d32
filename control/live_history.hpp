// What the head's live page draws (docs/operating.md, "The live page"):
// the newest report whole (status, membership, accounting) and a bounded
// history of the curves, as one JSON document the page polls. CAF-free;
// the coordinator's hook adds, the launcher says the end (thread-safe).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "control/run_report.hpp"
#include "messages/types.hpp"

namespace rlx {

class LiveHistory {
 public:
  // The curves the page draws, in the order of `series` in the JSON:
  // time_s, env_steps, steps_per_s, tokens_per_s, mean_return, pass_at_1,
  // lag_mean, lag_max, policy_loss, value_loss, entropy.
  static const std::vector<std::string>& curve_names();

  // At most `max_points` points per curve: past that, every other older
  // point is dropped (the first and the newest always stay), so a long
  // run keeps its whole shape at a coarser grain.
  explicit LiveHistory(std::string run_name, std::size_t max_points = 600);

  void add(const MetricsData& learner, const RunCounts& run);
  // The run's end ("solved", "budget", ...), shown by the page.
  void ended(const std::string& outcome, const std::string& summary);

  // {"run":..., "reports":N, "ended":null|{"outcome","summary"},
  //  "latest":<the metrics.jsonl line>|null, "by_explorer":{id:segments},
  //  "series":{name:[numbers or null]}}
  std::string json() const;
  std::size_t points() const;

 private:
  void thin();

  mutable std::mutex mu_;
  std::string run_name_;
  std::size_t max_points_;
  std::size_t reports_ = 0;
  std::string latest_;       // the newest metrics.jsonl line, without its newline
  std::string by_explorer_;  // JSON object
  std::string outcome_, summary_;
  std::vector<double> time_s_;
  std::vector<std::vector<double>> curves_;  // curve_names() after time_s, each as long as time_s_
  double last_time_s_ = 0, last_env_steps_ = 0, last_tokens_ = 0;
};

}  // namespace rlx
