// Reading a run's <log_dir>/metrics.jsonl in tests: its last line, a
// number from a line, the largest value a key took, and the segment
// accounting identity at the end of a run.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace rlx::test {

inline std::string last_metrics_line(const std::filesystem::path& log_dir) {
  std::ifstream in(log_dir / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

inline double json_number(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stod(line.substr(at + key.size() + 3));
}

// The largest value `key` took over the run's metrics lines.
inline double max_metric(const std::filesystem::path& log_dir, const std::string& key) {
  std::ifstream in(log_dir / "metrics.jsonl");
  std::string line;
  double best = 0;
  while (std::getline(in, line))
    if (!line.empty() && line.back() == '}') best = std::max(best, json_number(line, key));
  return best;
}

// The accounting identity on a metrics line written at the end of a run:
// every segment made was trained, dropped as stale, rejected, or lost with
// a dead member; nothing is still in flight, and nothing vanished (sent
// by a live explorer and never received: the explorers' own segment
// numbers would show it).
inline void check_segment_identity(const std::string& line) {
  INFO(line);
  const double produced = json_number(line, "segments_produced");
  CHECK(produced > 0);
  CHECK(produced == json_number(line, "segments_trained") + json_number(line, "segments_dropped_stale") +
                        json_number(line, "segments_rejected") + json_number(line, "segments_update_failed") +
                        json_number(line, "segments_lost"));
  CHECK(json_number(line, "segments_in_flight") == 0);
  CHECK(json_number(line, "segments_vanished") == 0);
}

}  // namespace rlx::test
