// Shared by the replay tests: a temporary directory, a synthetic log, and
// reading the index and files back.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/stream_frame.hpp"
#include "rollout_log/log_reader.hpp"
#include "rollout_log/log_writer.hpp"
#include "tests/helpers.hpp"
#include "tools/embedded_config.hpp"

namespace rlx::test {

namespace fs = std::filesystem;


// A log of a start entry, then `segments` rollouts (a weights entry after
// every 4th): seq 0 is the start.
inline void write_log(const LogWriterOptions& o, int segments) {
  auto w = LogWriter::create(o);
  REQUIRE(w.ok());
  REQUIRE((*w)->write_start(RunStartData{1, false, embedded_cluster_toml(), "<embedded>"}).ok());
  for (int i = 0; i < segments; ++i) {
    auto seg = make_segment(16, 2, static_cast<std::uint64_t>(i / 4), static_cast<std::uint32_t>(i % 2));
    seg.sequence = static_cast<std::uint64_t>(i / 2);
    seg.created_unix_ns = 1'000'000'000ull * static_cast<std::uint64_t>(i + 1);
    RolloutRecordData r{Verdict::trained, static_cast<std::uint64_t>(i / 4), static_cast<std::uint64_t>(i), 0, ""};
    REQUIRE((*w)->write_rollout(r, encode(seg, "test")).ok());
    if (i % 4 == 3)
      REQUIRE((*w)->write_weights(WeightVersionData{static_cast<std::uint64_t>(i / 4 + 1), 42, 1, 1, 10}).ok());
  }
  REQUIRE((*w)->close().ok());
}

inline std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline std::vector<IndexEntryData> read_index(const fs::path& p) {
  auto raw = read_bytes(p);
  std::vector<IndexEntryData> out;
  std::uint64_t pos = 0;
  while (pos < raw.size()) {
    auto n = framed_size(raw.data(), raw.size(), pos, 1 << 16);
    REQUIRE(n.ok());
    auto e = decode_index_entry(WireBuffer::copy_of(raw.data() + pos, *n));
    REQUIRE(e.ok());
    out.push_back(*e);
    pos += *n;
  }
  return out;
}

// Entries of the log at `dir`, or the error.
// Whether any problem the reader reported says `text`.
inline bool problem_says(const ReadReport& report, const std::string& text) {
  for (const auto& p : report.problems)
    if (p.what.find(text) != std::string::npos) return true;
  return false;
}

inline Result<ReadReport> read_all(const fs::path& dir, bool skip_bad, std::vector<LogEntryData>* out = nullptr) {
  ReadOptions ro;
  ro.skip_bad = skip_bad;
  return read_log(dir, ro, [&](const LogEntryData& e, const LogPosition&) {
    if (out) out->push_back(e);
    return true;
  });
}

}  // namespace rlx::test
