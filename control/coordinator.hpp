// The coordinator: builds the head's actors from the topology (and, in a
// single-process run, every node's fleet), tracks membership (explorers
// and member nodes join, leave, die: down messages; silent nodes are
// evicted), decides what each member node runs and allots the ids, scales
// explorers and reward workers on request (`rlx scale`: new ones go to the
// member nodes running the fewest, removed ones are the newest, drained),
// aggregates metrics into the
// status line and <log_dir>/metrics.jsonl, checks the stop condition and
// drains the run: explorers finish their step and leave, the recorder
// flushes, member nodes are told to stop (and awaited, a few seconds at
// most), then every actor exits and the launcher gets `done`.
#pragma once

#include <limits>

#include <functional>
#include <memory>
#include <set>

#include "actors/interfaces.hpp"
#include "control/run_report.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "envs/env.hpp"
#include "learner/learner_core.hpp"
#include "transport/weight_shelf.hpp"
#include "rollout_log/log_writer.hpp"

namespace rlx {
class GatewayHub;
}

namespace rlx {

// How a run ended (exit codes of `rlx launch`).
enum class RunOutcome : int {
  solved = 0,          // stop.mean_return reached
  budget = 3,          // max_env_steps, max_seconds or max_updates reached first
  bad_input = 2,       // a bad config or a damaged log (found before the run starts)
  failed = 4,          // the learner died or no explorer is left
  interrupted = 130,   // SIGINT / SIGTERM
};
// "solved", "budget", "bad_input", "failed", "interrupted".
const char* outcome_name(RunOutcome outcome);

struct CoordinatorOptions {
  ClusterConfig config;
  const EnvRegistry* envs = nullptr;          // must outlive the run
  std::function<void(const Status&)> on_status;  // called every report interval (coordinator's thread)
  caf::actor launcher;                        // receives (done_atom, int outcome, std::string summary)
  std::shared_ptr<LogWriter> log_writer;      // the rollout log (null: recording off)
  std::shared_ptr<LearnerCore> resumed;       // a learner rebuilt from the log (null: a fresh run)
  LearnerGroup* learner_group = nullptr;      // data-parallel ranks joined as rank 0 (null: one rank)
  // Nodes whose explorers and reward workers this process spawns; empty:
  // every node (the single-process run). Member nodes join through the gate.
  std::set<std::string> spawn_nodes;
  // Called once the learner and weight store exist (null handles if the
  // cluster could not start), so the head can open the gate.
  std::function<void(learner_actor, weight_store_actor)> on_core;
  // Where the head's store keeps its sets (shared with the bulk channel's
  // server); made by the store when null.
  std::shared_ptr<WeightShelf> weight_shelf;
  Logger log;
  std::set<std::uint64_t> drop_segments;      // fault injection, for tests (RunOptions::drop_segments)
  std::shared_ptr<const StrangerWatch> strangers;  // the head's ports' strangers (null: it opens none)
  std::shared_ptr<GatewayHub> gateway;              // tokens:gateway: the hub the head's explorers serve
  // With every metrics line (coordinator's thread): /metrics, alerts.
  std::function<void(const MetricsData&, const RunCounts&)> on_report;
};


// Spawns the actor in `system` (the state type stays private to the .cpp).
coordinator_actor spawn_coordinator(caf::actor_system& system, CoordinatorOptions options);

}  // namespace rlx
