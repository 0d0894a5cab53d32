// What the benchmark files share: a result row, the benchmark topology,
// a clock.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "envs/env.hpp"
#include "messages/types.hpp"
#include "messages/wire_buffer.hpp"
#include "bench/timing.hpp"

namespace rlx {

struct Row {
  std::string name, measured, baseline, ratio, note;
};


// The embedded cluster.toml, recording off, logging to rlx-bench-<pid> in the temp directory.
ClusterConfig bench_config(const EnvRegistry& envs);
// The same in the segment shape every throughput figure in
// docs/BENCHMARKS.md was measured with (64 steps x 16 envs per explorer,
// the default until issue 29 made updates smaller): steps/s, codec,
// recording, replay, data-parallel and node figures stay comparable.
ClusterConfig throughput_config(const EnvRegistry& envs);

// A token segment shaped like the agent workload's (examples/agent.toml):
// `rows` rows of a 256-token prompt and up to 512 completion tokens, a
// third of them observations, routes of 2 layers x top-2, a version per
// token (8 rows: one explorer's batch, 197,584 bytes encoded).
Segment agent_token_segment(std::uint32_t rows = 8);

// bench_replay.cpp: recording overhead and log size; replay speed.
std::vector<Row> bench_recording(const EnvRegistry& envs, int rounds);
std::vector<Row> bench_replay(const EnvRegistry& envs);
// bench_dp.cpp: the gradient all-reduce; learner samples/s with 1 and 2 ranks.
std::vector<Row> bench_data_parallel(const EnvRegistry& envs);
// bench_nodes.cpp: segment throughput across nodes; weight publish to member nodes.
std::vector<Row> bench_nodes(const EnvRegistry& envs);
// bench_segment_paths.cpp: the agent workload's token segments over the
// middleman (direct and through the front door) against the bulk channel.
std::vector<Row> bench_segment_paths(const EnvRegistry& envs);
// The same publish, with and without deltas, of the given consecutive sets.
std::vector<Row> bench_publish_deltas(const EnvRegistry& envs, const std::string& what,
                                      const std::vector<WireBuffer>& sets, std::vector<int> members);
// bench_learner_publish.cpp: a learner's weights into the store's message, before and now.
std::vector<Row> bench_learner_publish();
// bench_deltas.cpp: weight deltas' bytes against raw, for real policies' consecutive versions.
std::vector<Row> bench_deltas(const EnvRegistry& envs);
// bench_sandbox.cpp: sandboxed program evaluations against the bare interpreter.
std::vector<Row> bench_sandbox();
// bench_tokens.cpp: token sampling with and without the KV cache; MoE vs dense layer.
std::vector<Row> bench_tokens();
// bench_agent.cpp: agent episodes with continuous batching against the lockstep batch.
std::vector<Row> bench_agent();
std::vector<Row> bench_gateway();

}  // namespace rlx
