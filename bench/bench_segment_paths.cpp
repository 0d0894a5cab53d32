// Issue 27 item 4: should the agent workload's token segments cross nodes
// on the bulk channel? Each row moves a real encoded token segment's
// number of bytes one at a time (the next sent when the last was
// acknowledged: what one segment waits) over CAF's middleman, directly and
// through the head's front door (the path from a member node's explorer to
// the head's learner), and as a set of the same size fetched over the bulk
// channel (request, 1 MiB chunks, each checked), against raw loopback TCP
// in the same run (docs/results/across-nodes.md "Token segments: middleman or bulk").
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "bench/common.hpp"
#include "bench/transfers.hpp"
#include "messages/codec.hpp"

namespace rlx {

std::vector<Row> bench_segment_paths(const EnvRegistry& envs) {
  const ClusterConfig c = throughput_config(envs);
  const std::uint64_t chunk = std::uint64_t{1} << 20;
  std::vector<Row> rows;
  // One explorer's batch (8 rows), eight of them, and a 512-row batch.
  for (const std::uint32_t segment_rows : {8U, 64U, 512U}) {
    const std::size_t size = encode(agent_token_segment(segment_rows), "bench").size();
    // About 64 MiB a round, at least 8 segments.
    const std::size_t count = std::max<std::size_t>(8, (std::size_t{64} << 20) / size);
    std::vector<double> direct, door, bulk, raw;
    for (int round = 0; round < 3; ++round) {
      raw.push_back(raw_tcp_bytes_per_s(size, count * size));
      direct.push_back(caf_bytes_per_s(c, size, count, 1));
      door.push_back(caf_bytes_per_s(c, size, count, 1, true));
      bulk.push_back(bulk_bytes_per_s(size / 4, chunk, static_cast<int>(std::min<std::size_t>(count, 40))));
    }
    const auto ms = [size](const std::vector<double>& rates) { return static_cast<double>(size) / median(rates) * 1e3; };
    const double d = ms(direct), f = ms(door), b = ms(bulk), r = ms(raw);
    std::fprintf(stderr, "  token segment of %u rows (%zu B): middleman %.3f ms, through the door %.3f ms, bulk %.3f ms, raw %.3f ms\n",
                 segment_rows, size, d, f, b, r);
    const std::string what = fmt::format("agent token segment, {} rows ({:.2f} MB)", segment_rows, static_cast<double>(size) / 1e6);
    const std::string raw_cell = fmt::format("{:.3f} ms raw loopback TCP", r);
    rows.push_back({what + ", middleman, one at a time", fmt::format("{:.3f} ms", d), raw_cell, fmt::format("{:.2f}", r / d),
                    "acknowledged before the next; medians of 3 rounds"});
    rows.push_back({what + ", middleman through the front door", fmt::format("{:.3f} ms", f), raw_cell,
                    fmt::format("{:.2f}", r / f), "a member node's explorer to the head's learner"});
    rows.push_back({what + ", bulk channel fetch", fmt::format("{:.3f} ms", b), raw_cell, fmt::format("{:.2f}", r / b),
                    fmt::format("the same bytes as a set: a request, {} KiB chunks, each xxh64-checked; middleman / bulk {:.2f}",
                                chunk >> 10, f / b)});
  }
  return rows;
}

}  // namespace rlx
