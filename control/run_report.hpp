// What the coordinator reports of a run every interval, without the
// actor: the learner's metrics joined with the coordinator's own counts
// (membership, the segment ledger, weight swaps, the held-out score) into
// one line of <log_dir>/metrics.jsonl and the launcher's status line.
// CAF-free; plain data in, text or a struct out.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include <optional>

#include "control/segment_ledger.hpp"
#include "gateway/gateway_hub.hpp"
#include "messages/types.hpp"
#include "transport/strangers.hpp"

namespace rlx {

// One line of progress, for the launcher to show.
struct Status {
  double time_s = 0;
  std::uint64_t env_steps = 0;
  double steps_per_s = 0;       // over the last report interval
  std::uint64_t episodes = 0;
  double mean_return = 0;       // NaN before the first episode
  std::uint64_t policy_version = 0;
  double lag_mean = 0;
  std::uint64_t lag_max = 0;
  std::uint64_t trained = 0, dropped_stale = 0, rejected = 0;
  std::uint64_t lost = 0;       // segments made by explorers that died, never received
  std::uint64_t vanished = 0;   // segments sent and never received, though sender and learner lived
  std::uint64_t explorers = 0;
  std::uint64_t reward_workers = 0;
  std::uint64_t nodes = 1;      // processes in the cluster (the head counts)
  std::uint64_t strangers = 0;  // connections to the head's ports that never became peers (closed, counted)
  // Infrastructure failures: reward requests asked again, episodes masked
  // out, and the failures met by reason ("overloaded 3, reward_timeout 1";
  // "" none).
  std::uint64_t reward_retries = 0, rows_masked = 0;
  std::string infra_failures;
  // The token policy's evaluator: the newest held-out score (version 0 and
  // NaN before the first).
  std::uint64_t eval_version = 0;
  double pass_at_1 = std::numeric_limits<double>::quiet_NaN();
};

// The newest held-out score the evaluator sent.
struct HeldOutScore {
  std::uint64_t version = 0;
  double pass_at_1 = 0, mean_score = 0;
  std::uint32_t tasks = 0;
  bool any = false;  // none yet
};

// Observations of a latency, in seconds, counted in fixed buckets (the
// Prometheus histogram's, cumulated when written).
struct LatencyHistogram {
  // Upper bounds, seconds: 100 us to 10 s.
  static constexpr std::array<double, 12> kBounds = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
                                                     1e-2, 5e-2, 0.1,    0.5,    1.0,  10.0};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};  // the last: above every bound
  double sum_s = 0;
  std::uint64_t total = 0;

  void observe(double seconds);
};

// What the coordinator counts itself.
struct RunCounts {
  double time_s = 0;                     // since the run started
  std::uint64_t explorers = 0;           // live now
  std::uint64_t explorers_lost = 0;      // died or evicted
  std::uint64_t explorers_retired = 0;   // drained by a scale-down
  std::uint64_t explorers_rejoined = 0;  // outlived a dead head and rejoined this one
  std::uint64_t nodes = 1;               // processes (the head counts)
  std::uint64_t joins_refused = 0;
  std::uint64_t nodes_evicted = 0;
  std::uint64_t reward_workers = 0;
  std::uint64_t autoscale_changes = 0;
  double weight_swap_mean_us = 0;
  LatencyHistogram weight_swaps;         // each explorer's swap of new weights
  LatencyHistogram reward_latency;       // each reward request to a reward worker, asked to answered
  std::map<std::uint32_t, std::string> explorer_nodes;  // every explorer that joined -> its node
  std::map<std::string, std::uint64_t> explorers_by_node;  // live explorers by node
  std::uint64_t rss_mb = 0;              // the head process's resident memory
  std::uint64_t segments_unrecorded = 0;  // records the rollout log failed to take
  std::map<std::string, StrangerWatch::ByKind> strangers;  // by port ("head", "bulk"), then kind
  SegmentLedger::Totals segments;
  HeldOutScore eval;
  std::optional<GatewayCounts> gateway;  // tokens:gateway: the head's hub
};

// The gateway's counts as a JSON object ({"turns":...,"sessions_lost":...}).
std::string gateway_json(const GatewayCounts& g);

// A double as JSON: shortest of 6 significant digits, null for NaN or infinity.
std::string json_number(double x);

// Failures of the machinery by InfraFailure code: a JSON object of every
// reason ({"sandbox_start":0,...}), and a text of the non-zero ones.
std::string infra_failures_json(const std::vector<std::uint64_t>& by_code);
std::string infra_failures_text(const std::vector<std::uint64_t>& by_code);

// Strangers by port and kind: {"head":{"silent":0,...},"bulk":{...}}.
std::string strangers_json(const std::map<std::string, StrangerWatch::ByKind>& by_port);
std::uint64_t strangers_total(const std::map<std::string, StrangerWatch::ByKind>& by_port);

// One JSON object, newline-terminated: the line of metrics.jsonl.
std::string metrics_json_line(const MetricsData& learner, const RunCounts& run);

// The status line's numbers; `steps_per_s` over the interval just ended.
Status make_status(const MetricsData& learner, const RunCounts& run, double steps_per_s);

}  // namespace rlx
