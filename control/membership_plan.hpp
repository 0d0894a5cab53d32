// The coordinator's membership decisions, without the actor: which ids a
// member node's explorers and reward workers get (a topology node's first
// entry takes its topology ids, anything else fresh ones, and no id is
// ever given out twice, across resumed runs and rejoined explorers
// included), where a scale-up puts new explorers and reward workers (the
// member node running the fewest) and which ones a scale-down removes (the
// newest explorers; reward workers from the node running the most), the
// explorers running, ordered and retiring, the scaled-up explorers still
// waiting for their first segment to reach the learner, and when
// [autoscale] asks for a change.
//
// The coordinator (control/membership.cpp) tells it what happened (a node
// entered or went, an explorer joined or left) and carries out the orders
// it returns: spawn here or tell a member node, drain an explorer, stop
// reward workers. CAF-free; single-threaded (owned by the coordinator).
// Tested in tests/control/membership_plan_test.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/autoscale.hpp"
#include "core/config.hpp"

namespace rlx {

// Start `count` members with consecutive ids from `first_id` on member
// node `node`, or in the coordinator's process when `node` is empty.
struct SpawnOrder {
  enum class Role { explorer, reward } role = Role::explorer;
  std::string node;                     // "": this process
  std::uint32_t first_id = 0;
  std::uint32_t count = 0;
  std::uint64_t first_env_id = 0;       // explorers: their first environment's id
  std::uint32_t envs_per_explorer = 0;  // explorers
};

class MembershipPlan {
 public:
  using Clock = std::chrono::steady_clock;

  // The topology's explorer, env and reward ids are reserved for its nodes.
  explicit MembershipPlan(const ClusterConfig& config);

  // A resumed run: what the log says each explorer id delivered before. No
  // such id is given out again, and a member node whose topology ids the
  // log knows gets fresh ones (it is back, or its explorers rejoin with
  // theirs).
  void resume(const std::map<std::uint32_t, std::uint64_t>& delivered_before);

  // This process spawned topology node `name`'s fleet itself (the
  // single-process run, or the head's own node): its explorers are ordered
  // here, its reward workers run here.
  void spawned_here(const std::string& name);

  // ---- Member nodes ----
  // A node entered through the gate asking for a shape. `refused` says why
  // it is sent away; else `orders` is what it runs (reward workers first:
  // explorers start with their node's pool). A node that outlived the
  // previous head (`rejoined`) runs its fleet already: no orders.
  struct Entry {
    std::optional<std::string> refused;
    std::vector<SpawnOrder> orders;
    bool in_topology = false;
  };
  Entry node_entered(const std::string& name, std::uint32_t explorers, std::uint32_t envs_per_explorer,
                     std::uint32_t rewards, bool rejoined);
  // The node's connection closed or it was evicted: what it was ordered to
  // run and has not started is forgotten (its joined explorers leave one by
  // one through explorer_left).
  void node_gone(const std::string& name);
  std::size_t member_nodes() const { return nodes_.size(); }
  // The joined explorers that run on `node`.
  std::vector<std::uint32_t> explorers_on(const std::string& node) const;

  // ---- Explorers ----
  // Explorer `id` announced itself from `node` with envs [first_env, first_env + envs).
  void explorer_joined(std::uint32_t id, const std::string& node, std::uint64_t first_env, std::uint32_t envs);
  // Explorer `id` is gone (it died, drained, retired or was evicted):
  // whether a scale-down had asked it to go.
  bool explorer_left(std::uint32_t id);
  // Explorers running (not retiring), plus those ordered and not joined yet.
  std::uint32_t explorers_now() const;
  // Explorers ordered (here or on a member node still in the cluster) that
  // have not announced themselves yet: a stopping run waits for them too,
  // since what they make before the drain reaches them must be counted.
  std::size_t explorers_awaited() const { return ordered_.size(); }
  std::uint64_t reward_workers() const;

  // ---- Scaling ----
  struct ExplorerScale {
    std::vector<SpawnOrder> start;
    std::vector<std::uint32_t> drain;  // ids: each finishes its segment and leaves
    std::string said;                  // for the log and `rlx scale`
  };
  ExplorerScale scale_explorers(std::uint32_t want, Clock::time_point now);
  struct RewardScale {
    std::vector<SpawnOrder> start;
    std::map<std::string, std::uint32_t> stop;  // node ("": this process) -> workers to stop
    std::string said;
  };
  RewardScale scale_rewards(std::uint32_t want);

  // [autoscale]: the learner's counters when its newest report arrived
  // (time_s since the run began). Once an interval, the explorers wanted,
  // when that differs from explorers_now().
  struct LearnerSample {
    double time_s = 0, busy_s = 0;
    std::uint64_t received = 0, dropped_stale = 0;
  };
  std::optional<AutoscaleDecision> autoscale(const AutoscaleConfig& config, const LearnerSample& sample);

  // ---- Explorers awaited ----
  // Explorer `id` (scaled up, or rejoined after a head restart) is awaited
  // since `since`; `received` is what the learner had from it by then.
  void await_first(std::uint32_t id, Clock::time_point since, std::uint64_t received, const char* since_what);
  // The awaited explorers whose count at the learner (`received`) grew:
  // each once, with the seconds it took and since what.
  struct FirstSegment {
    std::uint32_t id;
    double seconds;
    const char* since_what;
  };
  std::vector<FirstSegment> first_segments(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& received, Clock::time_point now);

 private:
  struct Node {
    std::uint32_t envs_per_explorer = 16;
    std::uint32_t rewards = 0;
  };
  struct Awaited {
    Clock::time_point since;
    std::uint64_t received = 0;
    const char* since_what = "";
  };
  std::map<std::string, std::uint32_t> explorers_per_node() const;
  SpawnOrder allot_explorers(const std::string& node, std::uint32_t count, std::uint32_t envs_per_explorer);
  SpawnOrder allot_rewards(const std::string& node, std::uint32_t count);
  void order(const SpawnOrder& o, bool awaited, Clock::time_point now);

  ClusterConfig config_;
  std::uint32_t next_explorer_id_ = 0;  // after every explorer id used so far
  std::uint64_t next_env_id_ = 0;
  std::uint32_t next_reward_id_ = 0;
  std::set<std::string> entered_;       // topology nodes whose topology ids are taken
  std::map<std::string, Node> nodes_;   // member nodes
  std::uint32_t rewards_here_ = 0;      // reward workers in this process
  std::map<std::uint32_t, std::string> ordered_;  // explorer id -> node ("" here): ordered, not joined yet
  std::map<std::uint32_t, std::string> joined_;   // explorer id -> node it runs on
  std::set<std::uint32_t> retiring_;              // joined explorers a scale-down drains
  std::map<std::uint32_t, Awaited> awaiting_;
  std::optional<LearnerSample> autoscale_mark_;   // where the current [autoscale] interval began
};

}  // namespace rlx
