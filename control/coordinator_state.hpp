// The coordinator's state and the parts of it that live in separate files
// (control/membership.cpp: nodes, explorers and reward workers coming,
// going, scaled, as the membership plan orders; heartbeats and eviction).
// Private to the coordinator.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "control/coordinator.hpp"
#include "actors/guard.hpp"
#include "control/membership_plan.hpp"
#include "control/segment_ledger.hpp"
#include "envs/batch_env.hpp"
#include "envs/scorer.hpp"

namespace rlx {

struct CoordinatorState {
  CoordinatorOptions options;
  learner_actor learner;
  weight_store_actor weight_store;
  recorder_actor recorder;
  evaluator_actor evaluator;               // the token policy's, when [tokens] eval_tasks > 0
  HeldOutScore eval;                       // the newest held-out score
  // Explorers spawned here or joined, by id; reward workers in this
  // process; member nodes and their last heartbeat answers.
  std::map<std::uint32_t, explorer_actor> explorers;
  std::vector<reward_actor> rewards;
  std::map<std::string, node_actor> nodes;
  std::map<std::string, std::chrono::steady_clock::time_point> last_heard;
  // tokens:gateway: each member node's gateway counts at its last heartbeat
  // (cumulative; kept after it leaves: those sessions were served).
  std::map<std::string, GatewayCounts> node_gateway;
  std::optional<MembershipPlan> plan;         // ids, orders, scaling (made once the options are in)
  double metrics_at_s = 0;                    // when the learner's newest report arrived
  BatchEnvFactory factory;                    // for explorers this process starts later
  std::shared_ptr<const Scorer> scorer;       // for reward workers this process starts ([reward] scorer)
  EnvSpec spec;
  SegmentLedger ledger;                       // segments made, delivered before, lost, vanished, in flight
  std::uint64_t vanished_warned = 0;          // vanished segments already warned of
  // What the coordinator counts itself (the report's RunCounts).
  struct Tally {
    std::uint64_t explorers_joined = 0, explorers_lost = 0, explorers_retired = 0, nodes_evicted = 0,
                  joins_refused = 0, autoscale_changes = 0;
    std::uint64_t unrecorded = 0;             // records the rollout log did not take ([record] on_error)
    std::uint64_t swaps = 0;
    double swap_us_sum = 0;
    LatencyHistogram swap_latency;
    LatencyHistogram reward_latency;          // explorers' reward requests, asked to answered
    std::map<std::uint32_t, std::string> explorer_node;  // every explorer that joined -> its node
  } tally;
  // How the run ends: stopping (explorers drain), then finishing (the
  // recorder flushed, member nodes told to stop), then done (the launcher told).
  struct Ending {
    bool stopping = false, finish_started = false, finishing = false, done_sent = false;
    bool final_counts = false;                // the learner's counts taken after every explorer left
    RunOutcome outcome = RunOutcome::solved;
    std::string reason;
    std::string summary;                      // the run's one-line summary, once finishing
    std::chrono::steady_clock::time_point deadline;
  } end;
  MetricsData metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double last_tick_s = 0;
  std::uint64_t last_tick_steps = 0;
  std::ofstream jsonl;
  // How long an explorer takes to make a segment (a moving average of the
  // gaps between its produced reports): a stop waits for a segment in the
  // making that long, twice over, on top of 5 s (at most 120 s).
  std::map<std::uint32_t, std::chrono::steady_clock::time_point> last_produced;
  double segment_s = 0;
  std::chrono::steady_clock::duration drain_allowance() const {
    const double s = std::min(120.0, 5.0 + 2.0 * segment_s);
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  }
  // How long to wait for the learner's final counts: it answers after the
  // update it is in and the segments queued before the request, so a few
  // of its updates' time (30 s + 3 mean updates, at most 10 min), not a
  // fixed bound an update can outlast.
  // tokens:gateway: the head's hub's counts and every member node's.
  std::optional<GatewayCounts> gateway_counts() const {
    if (!options.gateway) return std::nullopt;
    auto sum = options.gateway->counts();
    for (const auto& [node, c] : node_gateway) sum += c;
    return sum;
  }
  std::chrono::milliseconds final_counts_wait() const {
    const double update_s = metrics.updates ? metrics.busy_s / static_cast<double>(metrics.updates) : 0;
    return std::chrono::milliseconds(static_cast<std::int64_t>(1e3 * std::clamp(30.0 + 3 * update_s, 30.0, 600.0)));
  }
  ErrorCounts errors;

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

namespace coord {

using Self = coordinator_actor::stateful_pointer<CoordinatorState>;

// coordinator.cpp
void begin_stop(Self self, RunOutcome outcome, const std::string& reason);
void finish(Self self);
void send_done(Self self);

// membership.cpp
// A node entered through the gate asking for a shape: it is told what to run.
// A node that outlived the previous head (rejoined) runs its fleet already.
void node_entered(Self self, const std::string& name, node_actor agent, std::uint32_t explorers,
                  std::uint32_t envs_per_explorer, std::uint32_t rewards, bool rejoined);
// A member node's agent went away (its connection closed).
void node_gone(Self self, const std::string& name);
// An explorer announced itself.
void explorer_joined(Self self, const JoinData& join, explorer_actor who);
// An explorer is gone (died, drained, retired or evicted with its node).
void explorer_gone(Self self, std::uint32_t id, const std::string& why, bool died);
// A stopping run whose explorers all left, none ordered still to announce
// itself, takes its final counts (finish).
void finish_if_drained(Self self);
// The explorer whose actor is `who`, if it is one of the run's.
std::optional<std::uint32_t> explorer_id(const CoordinatorState& st, const caf::actor_addr& who);
// Spawns a topology node's fleet in this process (the single-process run, the head's own node).
void spawn_here(Self self, const NodeConfig& node);
void evict(Self self, const std::string& name, double silent_s);
void heartbeat(Self self);
// `rlx scale`: explorers and reward workers wanted (-1: unchanged); what changed, or why not.
Result<std::string> scale(Self self, std::int32_t explorers, std::int32_t rewards);
// Logs the scaled-up explorers whose first segment reached the learner.
void note_first_segments(Self self);
// [autoscale]: once an interval, adds or removes an explorer from the learner's idle time and stale drops.
void autoscale(Self self);

}  // namespace coord
}  // namespace rlx
