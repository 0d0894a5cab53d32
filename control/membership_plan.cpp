#include "control/membership_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace rlx {

namespace {

std::string placed(const std::map<std::string, std::uint32_t>& plan, const std::string& here) {
  std::string out;
  for (const auto& [node, k] : plan)
    if (k > 0) out += fmt::format("{}{} on '{}'", out.empty() ? "" : ", ", k, node.empty() ? here : node);
  return out;
}

template <class Map>
auto fewest(Map& m) {
  return std::min_element(m.begin(), m.end(), [](auto& a, auto& b) { return a.second < b.second; });
}

}  // namespace

MembershipPlan::MembershipPlan(const ClusterConfig& config) : config_(config) {
  for (const auto& node : config_.nodes) {
    next_explorer_id_ += static_cast<std::uint32_t>(node.explorers);
    next_env_id_ += static_cast<std::uint64_t>(node.explorers * node.envs_per_explorer);
    next_reward_id_ += static_cast<std::uint32_t>(node.rewards);
  }
}

void MembershipPlan::resume(const std::map<std::uint32_t, std::uint64_t>& delivered_before) {
  for (const auto& [id, made] : delivered_before) {
    next_explorer_id_ = std::max(next_explorer_id_, id + 1);
    for (const auto& node : config_.nodes) {
      const auto first = config_.first_ids(node.name).first;
      if (node.name != config_.head().name && id >= first && id < first + static_cast<std::uint32_t>(node.explorers))
        entered_.insert(node.name);
    }
  }
}

void MembershipPlan::spawned_here(const std::string& name) {
  const NodeConfig* node = config_.node(name);
  if (!node) return;
  entered_.insert(name);
  const auto first = config_.first_ids(name).first;
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(node->explorers); ++i) ordered_[first + i] = "";
  rewards_here_ += static_cast<std::uint32_t>(node->rewards);
}

SpawnOrder MembershipPlan::allot_explorers(const std::string& node, std::uint32_t count, std::uint32_t envs_per_explorer) {
  SpawnOrder o{SpawnOrder::Role::explorer, node, next_explorer_id_, count, next_env_id_, envs_per_explorer};
  next_explorer_id_ += count;
  next_env_id_ += static_cast<std::uint64_t>(count) * envs_per_explorer;
  return o;
}

SpawnOrder MembershipPlan::allot_rewards(const std::string& node, std::uint32_t count) {
  SpawnOrder o{SpawnOrder::Role::reward, node, next_reward_id_, count, 0, 0};
  next_reward_id_ += count;
  return o;
}

void MembershipPlan::order(const SpawnOrder& o, bool awaited, Clock::time_point now) {
  if (o.role == SpawnOrder::Role::reward) {
    if (o.node.empty()) rewards_here_ += o.count;
    else nodes_[o.node].rewards += o.count;
    return;
  }
  for (std::uint32_t i = 0; i < o.count; ++i) {
    ordered_[o.first_id + i] = o.node;
    if (awaited) awaiting_[o.first_id + i] = {now, 0, "it was asked for"};
  }
}

MembershipPlan::Entry MembershipPlan::node_entered(const std::string& name, std::uint32_t explorers,
                                                   std::uint32_t envs_per_explorer, std::uint32_t rewards,
                                                   bool rejoined) {
  Entry entry;
  const NodeConfig* topo = config_.node(name);
  entry.in_topology = topo != nullptr;
  if (!rejoined && !topo && config_.run.mode == RunMode::sync) {
    entry.refused = "a sync run takes only the topology's nodes";
    return entry;
  }
  nodes_[name] = Node{envs_per_explorer, 0};
  if (rejoined) {
    // Its explorers rejoin one by one with their ids; its reward workers'
    // ids are the previous head's: none given out twice, at worst skipped.
    nodes_[name].rewards = rewards;
    next_reward_id_ += rewards;
    entered_.insert(name);
    return entry;
  }
  // A topology node's first entry takes the ids the topology gives it;
  // anything else (a new node, a node back after a loss) fresh ones, so no
  // two explorers of the run ever share an id (or a segment count).
  const bool first_entry = topo && entered_.insert(name).second;
  const bool topology_ids = first_entry && explorers <= topo->explorers && envs_per_explorer <= topo->envs_per_explorer &&
                            rewards <= topo->rewards;
  const auto now = Clock::now();
  if (rewards > 0) {
    entry.orders.push_back(topology_ids ? SpawnOrder{SpawnOrder::Role::reward, name, config_.first_reward_id(name), rewards}
                                        : allot_rewards(name, rewards));
    order(entry.orders.back(), false, now);
  }
  if (explorers > 0) {
    SpawnOrder o;
    if (topology_ids) {
      const auto [id, env] = config_.first_ids(name);
      o = SpawnOrder{SpawnOrder::Role::explorer, name, id, explorers, env, envs_per_explorer};
    } else {
      o = allot_explorers(name, explorers, envs_per_explorer);
    }
    entry.orders.push_back(o);
    order(o, !topo, now);
  }
  return entry;
}

void MembershipPlan::node_gone(const std::string& name) {
  nodes_.erase(name);
  for (auto it = ordered_.begin(); it != ordered_.end();) it = it->second == name ? ordered_.erase(it) : std::next(it);
}

std::vector<std::uint32_t> MembershipPlan::explorers_on(const std::string& node) const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, where] : joined_)
    if (where == node) ids.push_back(id);
  return ids;
}

void MembershipPlan::explorer_joined(std::uint32_t id, const std::string& node, std::uint64_t first_env,
                                     std::uint32_t envs) {
  joined_[id] = node;
  ordered_.erase(id);
  // Ids (and env ids) of explorers this plan did not allot are never given out again.
  next_explorer_id_ = std::max(next_explorer_id_, id + 1);
  next_env_id_ = std::max(next_env_id_, first_env + envs);
}

bool MembershipPlan::explorer_left(std::uint32_t id) {
  joined_.erase(id);
  ordered_.erase(id);
  awaiting_.erase(id);
  return retiring_.erase(id) > 0;
}

std::uint32_t MembershipPlan::explorers_now() const {
  return static_cast<std::uint32_t>(joined_.size() - retiring_.size() + ordered_.size());
}

std::uint64_t MembershipPlan::reward_workers() const {
  std::uint64_t n = rewards_here_;
  for (const auto& [name, node] : nodes_) n += node.rewards;
  return n;
}

// Explorers each member node runs or was ordered to run (retiring ones not counted).
std::map<std::string, std::uint32_t> MembershipPlan::explorers_per_node() const {
  std::map<std::string, std::uint32_t> n;
  for (const auto& [name, node] : nodes_) n[name] = 0;
  for (const auto& [id, node] : joined_)
    if (!retiring_.count(id) && n.count(node)) ++n[node];
  for (const auto& [id, node] : ordered_)
    if (n.count(node)) ++n[node];
  return n;
}

MembershipPlan::ExplorerScale MembershipPlan::scale_explorers(std::uint32_t want, Clock::time_point now) {
  ExplorerScale out;
  const std::uint32_t have = explorers_now();
  const std::string& here = config_.head().name;
  if (want > have) {
    auto per = explorers_per_node();
    std::map<std::string, std::uint32_t> plan;
    if (per.empty()) {
      plan[""] = want - have;  // no member node: this process runs them
    } else {
      for (std::uint32_t i = have; i < want; ++i) {  // each to the node running the fewest
        auto least = fewest(per);
        ++least->second;
        ++plan[least->first];
      }
    }
    for (const auto& [node, k] : plan) {
      const std::uint32_t envs = node.empty() ? static_cast<std::uint32_t>(config_.head().envs_per_explorer)
                                              : nodes_.at(node).envs_per_explorer;
      out.start.push_back(allot_explorers(node, k, envs));
      order(out.start.back(), true, now);
    }
    out.said = fmt::format("explorers {} -> {}: started {}", have, want, placed(plan, here));
    if (per.empty())
      out.said += fmt::format(" (ids {}..{})", out.start.front().first_id, out.start.front().first_id + want - have - 1);
    return out;
  }
  if (want < have) {
    // The newest joined explorers go first; they finish the segment in hand and leave.
    std::map<std::string, std::uint32_t> plan;
    for (auto it = joined_.rbegin(); it != joined_.rend() && out.drain.size() < have - want; ++it) {
      if (retiring_.count(it->first)) continue;
      retiring_.insert(it->first);
      out.drain.push_back(it->first);
      ++plan[it->second];
    }
    const auto drained = static_cast<std::uint32_t>(out.drain.size());
    out.said = fmt::format("explorers {} -> {}: draining {}", have, have - drained, placed(plan, here));
    if (drained < have - want)
      out.said += fmt::format(" ({} more are still starting: ask again once they run)", have - want - drained);
    return out;
  }
  out.said = fmt::format("explorers unchanged ({})", have);
  return out;
}

MembershipPlan::RewardScale MembershipPlan::scale_rewards(std::uint32_t want) {
  RewardScale out;
  const auto have = static_cast<std::uint32_t>(reward_workers());
  if (want == have) {
    out.said = fmt::format("reward workers unchanged ({})", have);
    return out;
  }
  std::map<std::string, std::uint32_t> per;  // "" is this process, counted only without member nodes
  for (const auto& [name, node] : nodes_) per[name] = node.rewards;
  if (nodes_.empty()) per[""] = rewards_here_;
  std::map<std::string, std::uint32_t> plan;
  const bool up = want > have;
  for (std::uint32_t i = std::min(have, want); i < std::max(have, want); ++i) {
    auto pick = up ? fewest(per)
                   : std::max_element(per.begin(), per.end(), [](auto& a, auto& b) { return a.second < b.second; });
    if (!up && pick->second == 0) break;
    pick->second += up ? 1 : -1;
    ++plan[pick->first];
  }
  for (const auto& [node, k] : plan) {
    if (up) {
      out.start.push_back(allot_rewards(node, k));
      order(out.start.back(), false, Clock::now());
    } else {
      out.stop[node] = k;
      if (node.empty()) rewards_here_ -= k;
      else nodes_[node].rewards -= k;
    }
  }
  out.said = fmt::format("reward workers {} -> {}: {} {}", have, want, up ? "started" : "stopped",
                         placed(plan, config_.head().name));
  return out;
}

std::optional<AutoscaleDecision> MembershipPlan::autoscale(const AutoscaleConfig& config, const LearnerSample& sample) {
  if (!config.enabled) return std::nullopt;
  if (!autoscale_mark_) {
    autoscale_mark_ = sample;
    return std::nullopt;
  }
  // Measured between two of the learner's reports at least interval_s apart.
  const LearnerSample& mark = *autoscale_mark_;
  if (sample.time_s - mark.time_s < config.interval_s) return std::nullopt;
  const AutoscaleSignals signals{sample.time_s - mark.time_s, sample.busy_s - mark.busy_s,
                                 sample.received - mark.received, sample.dropped_stale - mark.dropped_stale,
                                 explorers_now()};
  autoscale_mark_ = sample;
  AutoscaleDecision d = autoscale_decision(config, signals);
  if (d.explorers == static_cast<std::int32_t>(signals.explorers)) return std::nullopt;
  return d;
}

void MembershipPlan::await_first(std::uint32_t id, Clock::time_point since, std::uint64_t received,
                                 const char* since_what) {
  awaiting_[id] = Awaited{since, received, since_what};
}

std::vector<MembershipPlan::FirstSegment> MembershipPlan::first_segments(
    const std::vector<std::pair<std::uint32_t, std::uint64_t>>& received, Clock::time_point now) {
  std::vector<FirstSegment> out;
  for (const auto& [id, count] : received) {
    auto it = awaiting_.find(id);
    if (it == awaiting_.end() || count <= it->second.received) continue;
    out.push_back({id, std::chrono::duration<double>(now - it->second.since).count(), it->second.since_what});
    awaiting_.erase(it);
  }
  return out;
}

}  // namespace rlx
