// The coordinator's membership wiring: it tells the membership plan
// (control/membership_plan.hpp) what happened and carries out its orders
// (spawn here or tell a member node, drain explorers, stop reward
// workers); explorers leaving, dying or evicted with their node; the
// heartbeat that finds silent nodes.
#include <algorithm>

#include <fmt/format.h>

#include "assembly/fleet.hpp"
#include "control/coordinator_state.hpp"

namespace rlx::coord {

namespace {

using Clock = std::chrono::steady_clock;

// `here`: spawned by this process, linked (it dies with the coordinator).
void add_explorer(Self self, std::uint32_t id, explorer_actor e, bool here) {
  auto& st = self->state;
  self->monitor(e);
  if (here) self->link_to(e);
  st.explorers[id] = std::move(e);
  ++st.tally.explorers_joined;
}

// Starts what the plan ordered: here, or on a member node.
void carry_out(Self self, const SpawnOrder& o) {
  auto& st = self->state;
  const bool explorer = o.role == SpawnOrder::Role::explorer;
  if (!o.node.empty()) {
    self->send(st.nodes.at(o.node), spawn_atom::value,
               static_cast<std::uint8_t>(explorer ? FleetRole::explorer : FleetRole::reward), o.first_id,
               o.first_env_id, o.count, o.envs_per_explorer);
    return;
  }
  if (!explorer) {
    for (auto& r : spawn_rewards(self->system(), st.scorer, o.first_id, o.count, st.options.log)) {
      self->link_to(r);
      st.rewards.push_back(r);
    }
    return;
  }
  const auto& cfg = st.options.config;
  const ExplorerBatch batch{cfg.head().name, o.first_id, o.first_env_id, o.count, o.envs_per_explorer};
  std::uint32_t id = o.first_id;
  for (auto& e : spawn_explorers(self->system(), cfg, batch, st.factory, st.spec,
                                 FleetTargets{st.learner, st.weight_store, coordinator_actor{self}, st.rewards, st.options.gateway},
                                 st.options.log))
    add_explorer(self, id++, std::move(e), true);
}

std::string scale_explorers(Self self, std::uint32_t want) {
  auto& st = self->state;
  auto s = st.plan->scale_explorers(want, Clock::now());
  for (const auto& o : s.start) carry_out(self, o);
  for (const auto id : s.drain)
    if (auto it = st.explorers.find(id); it != st.explorers.end()) self->send(it->second, drain_atom::value);
  return s.said;
}

std::string scale_rewards(Self self, std::uint32_t want) {
  auto& st = self->state;
  auto s = st.plan->scale_rewards(want);
  for (const auto& o : s.start) carry_out(self, o);
  for (const auto& [node, k] : s.stop) {
    if (!node.empty()) {
      self->send(st.nodes.at(node), retire_atom::value, k);
      continue;
    }
    for (std::uint32_t i = 0; i < k && !st.rewards.empty(); ++i) {
      self->send_exit(st.rewards.back(), caf::exit_reason::user_shutdown);
      st.rewards.pop_back();
    }
  }
  return s.said;
}

}  // namespace

std::optional<std::uint32_t> explorer_id(const CoordinatorState& st, const caf::actor_addr& who) {
  for (const auto& [id, e] : st.explorers)
    if (e.address() == who) return id;
  return std::nullopt;
}

void spawn_here(Self self, const NodeConfig& node) {
  auto& st = self->state;
  st.plan->spawned_here(node.name);
  Fleet fleet = spawn_fleet(self->system(), st.options.config, node, st.factory, st.spec,
                            FleetTargets{st.learner, st.weight_store, coordinator_actor{self}, {}, st.options.gateway}, st.scorer,
                            st.options.log);
  for (auto& r : fleet.rewards) {
    self->link_to(r);
    st.rewards.push_back(r);
  }
  std::uint32_t id = st.options.config.first_ids(node.name).first;
  for (auto& e : fleet.explorers) add_explorer(self, id++, std::move(e), true);
}

void node_entered(Self self, const std::string& name, node_actor agent, std::uint32_t explorers,
                  std::uint32_t envs_per_explorer, std::uint32_t rewards, bool rejoined) {
  auto& st = self->state;
  if (st.end.stopping) return self->send(agent, stop_atom::value, st.end.reason);
  const auto entry = st.plan->node_entered(name, explorers, envs_per_explorer, rewards, rejoined);
  if (entry.refused) {
    ++st.tally.joins_refused;
    st.options.log->warn("node '{}' is not in the topology: sent away ({})", name, *entry.refused);
    return self->send(agent, stop_atom::value, *entry.refused);
  }
  self->monitor(agent);
  st.nodes[name] = agent;
  st.last_heard[name] = Clock::now();
  if (rejoined) {
    st.options.log->info("node '{}' rejoined after the head's restart: {} nodes now; its explorers and {} reward "
                         "workers go on",
                         name, st.nodes.size() + 1, rewards);
    return;
  }
  std::string ids;
  for (const auto& o : entry.orders) {
    carry_out(self, o);
    if (o.role == SpawnOrder::Role::explorer) ids = fmt::format(" (ids {}..{})", o.first_id, o.first_id + o.count - 1);
  }
  st.options.log->info("node '{}' joined: {} nodes now{}; runs {} explorers{} and {} reward workers", name,
                       st.nodes.size() + 1, entry.in_topology ? "" : " (not in the topology)", explorers, ids, rewards);
}

void node_gone(Self self, const std::string& name) {
  auto& st = self->state;
  st.nodes.erase(name);
  st.last_heard.erase(name);
  st.plan->node_gone(name);
  finish_if_drained(self);  // its explorers not announced yet never will be
}

void explorer_joined(Self self, const JoinData& join, explorer_actor who) {
  auto& st = self->state;
  const std::uint32_t id = join.member_id;
  st.plan->explorer_joined(id, join.node, join.first_env_id, join.num_envs);
  st.tally.explorer_node[id] = join.node;
  if (auto lost = join.rejoined ? st.ledger.rejoined(id, join.produced, join.kept) : std::nullopt) {
    const auto& before_all = st.ledger.delivered_before();
    const std::uint64_t before = before_all.count(id) ? before_all.at(id) : 0;
    st.plan->await_first(id, Clock::now(), before, "it rejoined");
    st.options.log->info("explorer {} rejoined from node '{}': {} segments made, {} of them in the log, {} held, {} lost "
                         "with the previous head",
                         id, join.node, join.produced, before, join.kept, *lost);
  }
  if (auto it = st.explorers.find(id); it != st.explorers.end() && it->second.address() == who.address()) return;
  if (st.end.finish_started) return self->send(who, drain_atom::value);  // its node is being stopped
  add_explorer(self, id, who, false);
  // Ordered before the stop, announced after it: drained like the others,
  // and awaited, so that the final counts hold what it makes meanwhile.
  if (st.end.stopping) self->send(who, drain_atom::value);
}

void finish_if_drained(Self self) {
  auto& st = self->state;
  if (st.end.stopping && !st.end.finish_started && st.explorers.empty() && st.plan->explorers_awaited() == 0)
    finish(self);
}

void explorer_gone(Self self, std::uint32_t id, const std::string& why, bool died) {
  auto& st = self->state;
  if (died) st.ledger.dead(id);
  const bool retired = st.plan->explorer_left(id);
  st.explorers.erase(id);
  if (st.end.stopping) return finish_if_drained(self);
  if (retired && !died) {
    ++st.tally.explorers_retired;
    st.options.log->info("explorer {} left (scaled down); {} left", id, st.explorers.size());
    return;
  }
  ++st.tally.explorers_lost;
  st.options.log->warn("an explorer {}; {} left", why, st.explorers.size());
  if (st.explorers.empty()) begin_stop(self, RunOutcome::failed, "no explorer left");
}

// A member node that stopped answering (SIGSTOP, a hang, a cut cable: no
// connection loss for CAF to report) leaves the cluster: its explorers
// are counted lost, and it is told to stop should it ever wake up.
void evict(Self self, const std::string& name, double silent_s) {
  auto& st = self->state;
  auto node = st.nodes.find(name);
  if (node == st.nodes.end()) return;
  ++st.tally.nodes_evicted;
  st.options.log->warn("node '{}' has not answered for {:.1f} s: evicted", name, silent_s);
  self->demonitor(node->second.address());
  self->send(node->second, stop_atom::value, fmt::format("evicted: no answer for {:.1f} s", silent_s));
  node_gone(self, name);
  for (const auto id : st.plan->explorers_on(name)) {
    auto it = st.explorers.find(id);
    if (it == st.explorers.end()) continue;
    self->demonitor(it->second.address());
    explorer_gone(self, id, "was evicted with node '" + name + "'", true);
  }
  if (st.end.finishing && st.nodes.empty()) send_done(self);
}

// The heartbeat: asks every member node whether it is alive, and evicts
// those silent for longer than [launch] evict_after_s.
void heartbeat(Self self) {
  auto& st = self->state;
  const auto& launch = st.options.config.launch;
  const auto now = Clock::now();
  const auto limit = std::chrono::duration<double>(launch.evict_after_s);
  std::vector<std::pair<std::string, double>> silent;
  for (auto& [name, agent] : st.nodes) {
    const auto heard = st.last_heard.emplace(name, now).first->second;
    const double quiet = std::chrono::duration<double>(now - heard).count();
    if (quiet > limit.count()) {
      silent.emplace_back(name, quiet);
      continue;
    }
    self->request(agent, std::chrono::duration_cast<std::chrono::milliseconds>(limit), ping_atom::value)
        .then([self, name = name](std::uint64_t) { self->state.last_heard[name] = Clock::now(); },
              [](const caf::error&) {});  // silence is judged by last_heard, not by one lost answer
    if (st.options.gateway)  // a gateway run: the node's own hub's counts join the run's
      self->request(agent, std::chrono::duration_cast<std::chrono::milliseconds>(limit), gateway_atom::value)
          .then(
              [self, name = name](const std::vector<std::uint64_t>& v) {
                if (v.empty()) return;  // (it serves none yet)
                auto c = gateway_counts_from(v);
                if (c) self->state.node_gateway[name] = *c;
                else self->state.options.log->warn("node '{}': {}", name, c.error().message);
              },
              [](const caf::error&) {});
  }
  for (const auto& [name, quiet] : silent) evict(self, name, quiet);
  if (!st.end.finishing)
    self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(launch.heartbeat_s)),
                       beat_atom::value);
}

Result<std::string> scale(Self self, std::int32_t explorers, std::int32_t rewards) {
  auto& st = self->state;
  if (st.end.stopping) return make_error(Errc::config_range, "the run is stopping (" + st.end.reason + ")");
  if (st.options.config.run.mode == RunMode::sync)
    return make_error(Errc::config_range, "a sync run has a fixed set of explorers (batch_segments x ranks)");
  if (explorers == 0 || explorers > 4096) return make_error(Errc::config_range, "explorers must be 1..4096");
  if (rewards > 4096) return make_error(Errc::config_range, "reward workers must be 0..4096");
  std::string said;
  if (explorers > 0) said = scale_explorers(self, static_cast<std::uint32_t>(explorers));
  if (rewards >= 0) said += (said.empty() ? "" : "; ") + scale_rewards(self, static_cast<std::uint32_t>(rewards));
  if (said.empty())
    said = fmt::format("nothing asked: {} explorers, {} reward workers", st.plan->explorers_now(), st.plan->reward_workers());
  st.options.log->info("scale: {}", said);
  return said;
}

void autoscale(Self self) {
  auto& st = self->state;
  if (st.end.stopping) return;
  const auto& m = st.metrics;
  const auto d = st.plan->autoscale(st.options.config.autoscale,
                                    {st.metrics_at_s, m.busy_s, m.segments_received, m.segments_dropped_stale});
  if (!d) return;
  ++st.tally.autoscale_changes;
  st.options.log->info("autoscale: {}: {}", d->why, scale_explorers(self, static_cast<std::uint32_t>(d->explorers)));
}

void note_first_segments(Self self) {
  auto& st = self->state;
  for (const auto& f : st.plan->first_segments(st.metrics.segments_by_explorer, Clock::now()))
    st.options.log->info("explorer {}: its first segment reached the learner {:.2f} s after {}", f.id, f.seconds,
                         f.since_what);
}

}  // namespace rlx::coord
