// The coordinator's membership: which member nodes run what, with which
// ids; explorers and reward workers scaled up and down; explorers leaving,
// dying or evicted with their node; the heartbeat that finds silent nodes.
#include <algorithm>

#include <fmt/format.h>

#include "control/coordinator_state.hpp"
#include "assembly/fleet.hpp"
#include "core/autoscale.hpp"

namespace rlx::coord {

namespace {

using Clock = std::chrono::steady_clock;

bool running(const CoordinatorState& st, const caf::actor_addr& a) { return !st.retiring.count(a); }

// Explorers each member node runs or was ordered to run (retiring ones not counted).
std::map<std::string, std::uint32_t> explorers_per_node(const CoordinatorState& st) {
  std::map<std::string, std::uint32_t> n;
  for (const auto& [name, agent] : st.nodes) n[name] = 0;
  for (const auto& [addr, info] : st.explorer_info)
    if (running(st, addr) && n.count(info.node)) ++n[info.node];
  for (const auto& [id, node] : st.ordered)
    if (n.count(node)) ++n[node];
  return n;
}

std::uint32_t explorers_now(const CoordinatorState& st) {
  std::uint32_t n = 0;
  for (const auto& e : st.explorers) n += running(st, e.address()) ? 1 : 0;
  return n + static_cast<std::uint32_t>(st.ordered.size());
}

// Starts `count` explorers with fresh ids (envs_per_explorer envs each) on
// member node `node`, or in this process when `node` is empty.
void start_explorers(Self self, const std::string& node, std::uint32_t count, std::uint32_t envs_per_explorer,
                     std::uint32_t first_id, std::uint64_t first_env_id, bool scaled) {
  auto& st = self->state;
  const auto now = Clock::now();
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!node.empty()) st.ordered[first_id + i] = node;
    if (scaled) st.awaiting_first[first_id + i] = {now, 0, "it was asked for"};
  }
  if (!node.empty()) {
    self->send(st.nodes.at(node), spawn_atom::value, static_cast<std::uint8_t>(FleetRole::explorer), first_id,
               first_env_id, count, envs_per_explorer);
    return;
  }
  const auto& cfg = st.options.config;
  const ExplorerBatch batch{cfg.head().name, first_id, first_env_id, count, envs_per_explorer};
  for (auto& e : spawn_explorers(self->system(), cfg, batch, st.factory, st.spec,
                                 FleetTargets{st.learner, st.weight_store, coordinator_actor{self}, st.rewards},
                                 st.options.log)) {
    self->monitor(e);
    st.explorers.push_back(e);
    ++st.explorers_joined;
  }
}

// Fresh ids for `count` explorers of `envs_per_explorer` envs each.
std::pair<std::uint32_t, std::uint64_t> allot_explorers(CoordinatorState& st, std::uint32_t count,
                                                        std::uint32_t envs_per_explorer) {
  const std::pair<std::uint32_t, std::uint64_t> first{st.next_explorer_id, st.next_env_id};
  st.next_explorer_id += count;
  st.next_env_id += static_cast<std::uint64_t>(count) * envs_per_explorer;
  return first;
}

void start_rewards(Self self, const std::string& node, std::uint32_t count) {
  auto& st = self->state;
  const std::uint32_t first = st.next_reward_id;
  st.next_reward_id += count;
  if (!node.empty()) {
    st.node_rewards[node] += count;
    self->send(st.nodes.at(node), spawn_atom::value, static_cast<std::uint8_t>(FleetRole::reward), first,
               std::uint64_t{0}, count, std::uint32_t{0});
    return;
  }
  for (auto& r : spawn_rewards(self->system(), st.scorer, first, count, st.options.log)) st.rewards.push_back(r);
}

std::string placed(const std::map<std::string, std::uint32_t>& plan) {
  std::string out;
  for (const auto& [node, k] : plan)
    if (k > 0) out += fmt::format("{}{} on '{}'", out.empty() ? "" : ", ", k, node);
  return out;
}

std::string scale_explorers(Self self, std::uint32_t want) {
  auto& st = self->state;
  const std::uint32_t now = explorers_now(st);
  if (want > now) {
    auto per = explorers_per_node(st);
    if (per.empty()) {  // no member node: this process runs them
      const auto envs = static_cast<std::uint32_t>(st.options.config.head().envs_per_explorer);
      auto [id, env] = allot_explorers(st, want - now, envs);
      start_explorers(self, "", want - now, envs, id, env, true);
      return fmt::format("explorers {} -> {}: started {} on '{}' (ids {}..{})", now, want, want - now,
                         st.options.config.head().name, id, id + want - now - 1);
    }
    std::map<std::string, std::uint32_t> plan;
    for (std::uint32_t i = now; i < want; ++i) {  // each to the node running the fewest
      auto least = std::min_element(per.begin(), per.end(), [](auto& a, auto& b) { return a.second < b.second; });
      ++least->second;
      ++plan[least->first];
    }
    for (const auto& [node, k] : plan) {
      const std::uint32_t envs = st.node_envs.count(node) ? st.node_envs[node] : 16;
      auto [id, env] = allot_explorers(st, k, envs);
      start_explorers(self, node, k, envs, id, env, true);
    }
    return fmt::format("explorers {} -> {}: started {}", now, want, placed(plan));
  }
  if (want < now) {
    // The newest explorers go first; they finish the segment in hand and leave.
    std::vector<std::pair<std::uint32_t, caf::actor_addr>> candidates;
    for (const auto& [addr, info] : st.explorer_info)
      if (running(st, addr)) candidates.emplace_back(info.id, addr);
    std::sort(candidates.begin(), candidates.end(), [](auto& a, auto& b) { return a.first > b.first; });
    std::map<std::string, std::uint32_t> plan;
    std::uint32_t drained = 0;
    for (const auto& [id, addr] : candidates) {
      if (drained == now - want) break;
      auto it = std::find_if(st.explorers.begin(), st.explorers.end(),
                             [&](const explorer_actor& e) { return e.address() == addr; });
      if (it == st.explorers.end()) continue;
      st.retiring.insert(addr);
      self->send(*it, drain_atom::value);
      ++plan[st.explorer_info[addr].node];
      ++drained;
    }
    std::string text = fmt::format("explorers {} -> {}: draining {}", now, now - drained, placed(plan));
    if (drained < now - want) text += fmt::format(" ({} more are still starting: ask again once they run)", now - want - drained);
    return text;
  }
  return fmt::format("explorers unchanged ({})", now);
}

std::string scale_rewards(Self self, std::uint32_t want) {
  auto& st = self->state;
  const auto now = static_cast<std::uint32_t>(reward_workers(st));
  std::map<std::string, std::uint32_t> per = st.node_rewards;  // "" is this process
  for (const auto& [name, agent] : st.nodes) per.emplace(name, 0);
  if (st.nodes.empty()) per[""] = static_cast<std::uint32_t>(st.rewards.size());
  std::map<std::string, std::uint32_t> plan;
  const bool up = want > now;
  for (std::uint32_t i = std::min(now, want); i < std::max(now, want); ++i) {
    auto pick = up ? std::min_element(per.begin(), per.end(), [](auto& a, auto& b) { return a.second < b.second; })
                   : std::max_element(per.begin(), per.end(), [](auto& a, auto& b) { return a.second < b.second; });
    if (!up && pick->second == 0) break;
    pick->second += up ? 1 : -1;
    ++plan[pick->first];
  }
  for (const auto& [node, k] : plan) {
    if (up) {
      start_rewards(self, node, k);
    } else if (node.empty()) {
      for (std::uint32_t i = 0; i < k && !st.rewards.empty(); ++i) {
        self->send_exit(st.rewards.back(), caf::exit_reason::user_shutdown);
        st.rewards.pop_back();
      }
    } else {
      st.node_rewards[node] -= k;
      self->send(st.nodes.at(node), retire_atom::value, k);
    }
  }
  if (plan.count("")) plan[st.options.config.head().name] = std::exchange(plan[""], 0);
  if (want == now) return fmt::format("reward workers unchanged ({})", now);
  return fmt::format("reward workers {} -> {}: {} {}", now, want, up ? "started" : "stopped", placed(plan));
}

}  // namespace

void node_entered(Self self, const std::string& name, node_actor agent, std::uint32_t explorers,
                  std::uint32_t envs_per_explorer, std::uint32_t rewards, bool rejoined) {
  auto& st = self->state;
  const auto& cfg = st.options.config;
  if (st.stopping) return self->send(agent, stop_atom::value, st.reason);
  const NodeConfig* topo = cfg.node(name);
  if (!rejoined && !topo && cfg.run.mode == RunMode::sync) {
    ++st.joins_refused;
    st.options.log->warn("node '{}' is not in the topology, and a sync run has a fixed set of explorers: sent away", name);
    return self->send(agent, stop_atom::value, std::string("a sync run takes only the topology's nodes"));
  }
  self->monitor(agent);
  st.nodes[name] = agent;
  st.last_heard[name] = Clock::now();
  st.node_envs[name] = envs_per_explorer;
  if (rejoined) {
    // It outlived the previous head and runs its fleet already: its
    // explorers rejoin one by one with their ids; a later entry of this
    // name gets fresh ones.
    st.node_rewards[name] = rewards;
    st.next_reward_id += rewards;  // their ids are the previous head's: none given out twice, at worst skipped
    st.entered.insert(name);
    st.options.log->info("node '{}' rejoined after the head's restart: {} nodes now; its explorers and {} reward "
                         "workers go on",
                         name, st.nodes.size() + 1, rewards);
    return;
  }
  // A topology node's first entry takes the ids the topology gives it;
  // anything else (a new node, a node back after a loss) fresh ones, so no
  // two explorers of the run ever share an id (or a segment count).
  const bool first_entry = topo && st.entered.insert(name).second;
  const bool topology_ids = first_entry && explorers <= topo->explorers &&
                            envs_per_explorer <= topo->envs_per_explorer && rewards <= topo->rewards;
  // Reward workers first: the node's explorers start with its pool.
  if (rewards > 0) {
    if (topology_ids) {
      st.node_rewards[name] = rewards;
      self->send(agent, spawn_atom::value, static_cast<std::uint8_t>(FleetRole::reward), first_reward_id(cfg, name),
                 std::uint64_t{0}, rewards, std::uint32_t{0});
    } else {
      start_rewards(self, name, rewards);
    }
  }
  std::uint32_t first_id = 0;
  if (explorers > 0) {
    auto [id, env] = topology_ids ? cfg.first_ids(name) : allot_explorers(st, explorers, envs_per_explorer);
    first_id = id;
    start_explorers(self, name, explorers, envs_per_explorer, id, env, !topo);
  }
  st.options.log->info("node '{}' joined: {} nodes now{}; runs {} explorers{} and {} reward workers", name,
                       st.nodes.size() + 1, topo ? "" : " (not in the topology)", explorers,
                       explorers ? fmt::format(" (ids {}..{})", first_id, first_id + explorers - 1) : "", rewards);
}

void node_gone(Self self, const std::string& name) {
  auto& st = self->state;
  st.nodes.erase(name);
  st.last_heard.erase(name);
  st.node_envs.erase(name);
  st.node_rewards.erase(name);
  for (auto it = st.ordered.begin(); it != st.ordered.end();)
    it = it->second == name ? st.ordered.erase(it) : std::next(it);
}

void explorer_joined(Self self, const JoinData& join, explorer_actor who) {
  auto& st = self->state;
  const std::uint32_t id = join.member_id;
  st.explorer_info[who.address()] = CoordinatorState::ExplorerInfo{id, join.node};
  st.ordered.erase(id);
  // Ids (and env ids) of explorers this head did not allot are never given out again.
  st.next_explorer_id = std::max(st.next_explorer_id, id + 1);
  st.next_env_id = std::max(st.next_env_id, join.first_env_id + join.num_envs);
  if (auto lost = join.rejoined ? st.ledger.rejoined(id, join.produced, join.kept) : std::nullopt) {
    const auto& before_all = st.ledger.delivered_before();
    const std::uint64_t before = before_all.count(id) ? before_all.at(id) : 0;
    st.awaiting_first[id] = {Clock::now(), before, "it rejoined"};
    st.options.log->info("explorer {} rejoined from node '{}': {} segments made, {} of them in the log, {} held, {} lost "
                         "with the previous head",
                         id, join.node, join.produced, before, join.kept, *lost);
  }
  const bool known = std::any_of(st.explorers.begin(), st.explorers.end(),
                                 [&](const explorer_actor& e) { return e.address() == who.address(); });
  if (known) return;
  if (st.stopping) return self->send(who, drain_atom::value);
  self->monitor(who);
  st.explorers.push_back(who);
  ++st.explorers_joined;
}

void explorer_gone(Self self, std::vector<explorer_actor>::iterator it, const std::string& why, bool died) {
  auto& st = self->state;
  std::uint32_t id = 0;
  bool known = false;
  if (auto info = st.explorer_info.find(it->address()); info != st.explorer_info.end()) {
    id = info->second.id;
    known = true;
    if (died) st.ledger.dead(id);
    st.explorer_info.erase(info);
  }
  const bool retired = st.retiring.erase(it->address()) > 0;
  if (known) st.awaiting_first.erase(id);
  st.explorers.erase(it);
  if (st.stopping) {
    if (st.explorers.empty() && !st.finishing) finish(self);
    return;
  }
  if (retired && !died) {
    ++st.explorers_retired;
    st.options.log->info("explorer {} left (scaled down); {} left", id, st.explorers.size());
    return;
  }
  ++st.explorers_lost;
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
  ++st.nodes_evicted;
  st.options.log->warn("node '{}' has not answered for {:.1f} s: evicted", name, silent_s);
  self->demonitor(node->second.address());
  self->send(node->second, stop_atom::value, std::string("evicted: no answer for ") + fmt::format("{:.1f}", silent_s) + " s");
  node_gone(self, name);
  std::vector<caf::actor_addr> theirs;
  for (const auto& [addr, info] : st.explorer_info)
    if (info.node == name) theirs.push_back(addr);
  for (const auto& addr : theirs) {
    auto it = std::find_if(st.explorers.begin(), st.explorers.end(),
                           [&](const explorer_actor& e) { return e.address() == addr; });
    if (it == st.explorers.end()) continue;
    self->demonitor(it->address());
    explorer_gone(self, it, "was evicted with node '" + name + "'", true);
  }
  if (st.finishing && st.nodes.empty()) send_done(self);
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
  }
  for (const auto& [name, quiet] : silent) evict(self, name, quiet);
  if (!st.finishing)
    self->delayed_send(self, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(launch.heartbeat_s)),
                       beat_atom::value);
}

Result<std::string> scale(Self self, std::int32_t explorers, std::int32_t rewards) {
  auto& st = self->state;
  if (st.stopping) return make_error(Errc::config_range, "the run is stopping (" + st.reason + ")");
  if (st.options.config.run.mode == RunMode::sync)
    return make_error(Errc::config_range, "a sync run has a fixed set of explorers (batch_segments x ranks)");
  if (explorers == 0 || explorers > 4096) return make_error(Errc::config_range, "explorers must be 1..4096");
  if (rewards > 4096) return make_error(Errc::config_range, "reward workers must be 0..4096");
  std::string said;
  if (explorers > 0) said = scale_explorers(self, static_cast<std::uint32_t>(explorers));
  if (rewards >= 0) said += (said.empty() ? "" : "; ") + scale_rewards(self, static_cast<std::uint32_t>(rewards));
  if (said.empty()) said = fmt::format("nothing asked: {} explorers, {} reward workers", explorers_now(st), reward_workers(st));
  st.options.log->info("scale: {}", said);
  return said;
}

void autoscale(Self self) {
  auto& st = self->state;
  const AutoscaleConfig& config = st.options.config.autoscale;
  if (!config.enabled || st.stopping) return;
  const auto& m = st.metrics;
  const CoordinatorState::AutoscaleMark now{true, st.metrics_at_s, m.busy_s, m.segments_received,
                                           m.segments_dropped_stale};
  auto& mark = st.autoscale_mark;
  if (!mark.set) {
    mark = now;
    return;
  }
  // Measured between two of the learner's reports at least interval_s apart.
  if (now.time_s - mark.time_s < config.interval_s) return;
  const AutoscaleSignals signals{now.time_s - mark.time_s, now.busy_s - mark.busy_s, now.received - mark.received,
                                 now.dropped_stale - mark.dropped_stale, explorers_now(st)};
  mark = now;
  const AutoscaleDecision d = autoscale_decision(config, signals);
  if (d.explorers == static_cast<std::int32_t>(signals.explorers)) return;
  ++st.autoscale_changes;
  st.options.log->info("autoscale: {}: {}", d.why, scale_explorers(self, static_cast<std::uint32_t>(d.explorers)));
}

void note_first_segments(Self self) {
  auto& st = self->state;
  if (st.awaiting_first.empty()) return;
  const auto now = Clock::now();
  for (const auto& [id, received] : st.metrics.segments_by_explorer) {
    auto it = st.awaiting_first.find(id);
    if (it == st.awaiting_first.end() || received <= it->second.received) continue;
    st.options.log->info("explorer {}: its first segment reached the learner {:.2f} s after {}", id,
                         std::chrono::duration<double>(now - it->second.since).count(), it->second.since_what);
    st.awaiting_first.erase(it);
  }
}

}  // namespace rlx::coord
