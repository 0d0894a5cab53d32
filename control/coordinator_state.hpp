// The coordinator's state and the parts of it that live in separate files
// (actors/membership.cpp: nodes, explorers and reward workers coming,
// going, scaled; heartbeats and eviction). Private to the coordinator.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include "control/coordinator.hpp"
#include "actors/guard.hpp"
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
  std::vector<explorer_actor> explorers;
  std::vector<reward_actor> rewards;
  std::map<std::string, node_actor> nodes;    // member nodes in the cluster
  std::map<std::string, std::chrono::steady_clock::time_point> last_heard;  // each node's last heartbeat answer
  std::uint64_t nodes_evicted = 0;
  // Segment accounting: every segment an explorer reports as made ends
  // trained, dropped stale, rejected, or lost with a dead explorer (or is
  // still in flight while the run goes on).
  struct ExplorerInfo {
    std::uint32_t id = 0;
    std::string node;
  };
  std::map<caf::actor_addr, ExplorerInfo> explorer_info;  // from each explorer's join
  // Membership: ids allotted so far, orders sent, and what scaling changed.
  std::uint32_t next_explorer_id = 0;         // after every explorer id used so far
  std::uint64_t next_env_id = 0;
  std::uint32_t next_reward_id = 0;
  std::set<std::string> entered;              // topology nodes whose topology ids are taken
  std::map<std::uint32_t, std::string> ordered;  // explorer id -> node: ordered, not joined yet
  std::map<std::string, std::uint32_t> node_envs;     // a member node's envs per explorer
  std::map<std::string, std::uint32_t> node_rewards;  // a member node's reward workers
  std::set<caf::actor_addr> retiring;         // explorers drained by a scale-down
  std::uint64_t explorers_retired = 0;
  // Explorers a scale-up started (or that rejoined after a head restart):
  // since when, and what the learner had received from them by then;
  // logged when their next segment reaches the learner.
  struct Awaited {
    std::chrono::steady_clock::time_point since;
    std::uint64_t received = 0;
    const char* since_what = "";
  };
  std::map<std::uint32_t, Awaited> awaiting_first;
  // [autoscale]: where the current interval began.
  // Times are when the learner's reports arrived: a report says how busy
  // the learner was up to then (a long update sends none until it ends).
  double metrics_at_s = 0;                    // when the newest report arrived
  struct AutoscaleMark {
    bool set = false;
    double time_s = 0, busy_s = 0;
    std::uint64_t received = 0, dropped_stale = 0;
  } autoscale_mark;
  std::uint64_t autoscale_changes = 0;
  BatchEnvFactory factory;                    // for explorers this process starts later
  std::shared_ptr<const Scorer> scorer;       // for reward workers this process starts ([reward] scorer)
  EnvSpec spec;
  SegmentLedger ledger;                       // segments made, delivered before, lost, in flight
  std::uint64_t explorers_lost = 0;
  std::uint64_t explorers_joined = 0;
  std::uint64_t joins_refused = 0;
  bool finish_started = false;
  bool finishing = false;                     // waiting for member nodes to stop
  std::string summary;                        // the run's one-line summary, once finishing
  bool done_sent = false;
  MetricsData metrics;
  double swap_us_sum = 0;
  std::uint64_t swaps = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double last_tick_s = 0;
  std::uint64_t last_tick_steps = 0;
  std::ofstream jsonl;
  bool stopping = false;
  RunOutcome outcome = RunOutcome::solved;
  std::string reason;
  std::chrono::steady_clock::time_point stop_deadline;
  // How long an explorer takes to make a segment (a moving average of the
  // gaps between its produced reports): a stop waits for a segment in the
  // making that long, twice over, on top of 5 s (at most 120 s).
  std::map<std::uint32_t, std::chrono::steady_clock::time_point> last_produced;
  double segment_s = 0;
  std::chrono::steady_clock::duration drain_allowance() const {
    const double s = std::min(120.0, 5.0 + 2.0 * segment_s);
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
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
std::uint64_t reward_workers(const CoordinatorState& st);

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
void explorer_gone(Self self, std::vector<explorer_actor>::iterator it, const std::string& why, bool died);
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
