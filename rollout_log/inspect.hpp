// A summary of a rollout log: what `rlx inspect` prints (as text or JSON)
// and what its --plot draws.
#pragma once

#include <map>

#include "rollout_log/log_reader.hpp"

namespace rlx {

struct LogSummary {
  ReadReport read;
  std::uint64_t runs = 0, resumes = 0;          // start entries (resumes among them)
  std::uint64_t segments = 0, trained = 0, dropped_stale = 0, rejected = 0;
  std::uint64_t update_failed = 0;              // admitted, but their batch's update failed (not in trained)
  std::map<std::string, std::uint64_t> drop_reasons;  // "dropped_stale: lag 5", "rejected: malformed", "update failed: ..."
  std::uint64_t env_steps = 0, episodes = 0, episodes_lost = 0;
  std::uint64_t first_ns = 0, last_ns = 0;      // segment creation times (explorers' clocks)
  std::map<std::uint64_t, std::uint64_t> lag_segments;  // lag -> segments (trained and dropped)
  struct Explorer { std::uint64_t segments = 0, steps = 0, episodes = 0; double return_sum = 0; };
  std::map<std::uint32_t, Explorer> explorers;
  struct Version { std::uint64_t admitted = 0, behaviour_steps = 0; bool published = false; };
  std::map<std::uint64_t, Version> versions;    // admitted: segments admitted at it; behaviour_steps: steps it chose
  std::uint64_t versions_published = 0, last_version = 0;
  // Over time: one row per segment with data.
  struct Point { double t = 0; double mean_return = 0; int episodes = 0; std::uint64_t lag = 0; Verdict verdict{}; };
  std::vector<Point> points;
  // Returns over time: the run cut in `buckets` equal spans.
  struct Bucket { double t0 = 0, t1 = 0; std::uint64_t episodes = 0; double mean_return = 0; };
  std::vector<Bucket> returns_over_time;
  double span_s() const { return last_ns > first_ns ? static_cast<double>(last_ns - first_ns) * 1e-9 : 0.0; }
};

Result<LogSummary> summarise_log(const std::filesystem::path& log, const ReadOptions& read, int buckets = 10);

std::string summary_text(const LogSummary& s);
std::string summary_json(const LogSummary& s);

// Draws return and staleness over time into `png` with gnuplot.
Result<void> plot_log(const LogSummary& s, const std::filesystem::path& png);

// Draws the curves of <log_dir>/metrics.jsonl into `png` with gnuplot.
Result<void> plot_metrics(const std::filesystem::path& metrics_jsonl, const std::filesystem::path& png,
                          std::uint64_t* bad_lines = nullptr);

}  // namespace rlx
