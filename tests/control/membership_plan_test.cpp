// The coordinator's membership plan on its own: ids never given out twice,
// scale-ups to the least loaded node, scale-downs of the newest explorers,
// reward workers placed and removed, nodes refused, autoscale intervals.
#include <catch2/catch.hpp>

#include <set>

#include "control/membership_plan.hpp"

using namespace rlx;

namespace {

// A head running nothing and two topology member nodes.
ClusterConfig topology(RunMode mode = RunMode::async) {
  ClusterConfig c;
  c.run.mode = mode;
  NodeConfig head;
  head.name = "head";
  head.actors = {"coordinator", "learner", "weight_store"};
  head.envs_per_explorer = 4;
  NodeConfig a;
  a.name = "a";
  a.explorers = 2;
  a.envs_per_explorer = 8;
  a.rewards = 1;
  NodeConfig b = a;
  b.name = "b";
  b.explorers = 1;
  b.rewards = 2;
  c.nodes = {head, a, b};
  return c;
}

// Every explorer id and env id the orders hand out.
void take_ids(const std::vector<SpawnOrder>& orders, std::set<std::uint32_t>& ids, std::set<std::uint64_t>& envs) {
  for (const auto& o : orders) {
    if (o.role != SpawnOrder::Role::explorer) continue;
    for (std::uint32_t i = 0; i < o.count; ++i) {
      CHECK(ids.insert(o.first_id + i).second);
      for (std::uint32_t e = 0; e < o.envs_per_explorer; ++e)
        CHECK(envs.insert(o.first_env_id + std::uint64_t{i} * o.envs_per_explorer + e).second);
    }
  }
}

void join_all(MembershipPlan& p, const std::vector<SpawnOrder>& orders) {
  for (const auto& o : orders)
    if (o.role == SpawnOrder::Role::explorer)
      for (std::uint32_t i = 0; i < o.count; ++i)
        p.explorer_joined(o.first_id + i, o.node, o.first_env_id + std::uint64_t{i} * o.envs_per_explorer,
                          o.envs_per_explorer);
}

}  // namespace

TEST_CASE("a topology node's first entry takes its topology ids, and a second entry, a stranger and a scale-up get fresh ones",
          "[control][membership]") {
  const auto cfg = topology();
  MembershipPlan p(cfg);
  std::set<std::uint32_t> ids;
  std::set<std::uint64_t> envs;

  auto a = p.node_entered("a", 2, 8, 1, false);
  REQUIRE_FALSE(a.refused);
  REQUIRE(a.orders.size() == 2);
  CHECK(a.orders[0].role == SpawnOrder::Role::reward);  // the pool first: explorers start with it
  CHECK(a.orders[0].first_id == 0);
  CHECK(a.orders[1].first_id == 0);
  CHECK(a.orders[1].first_env_id == 0);
  take_ids(a.orders, ids, envs);

  auto b = p.node_entered("b", 1, 8, 2, false);
  CHECK(b.orders[0].first_id == cfg.first_reward_id("b"));
  CHECK(b.orders[1].first_id == cfg.first_ids("b").first);
  take_ids(b.orders, ids, envs);
  join_all(p, a.orders);
  join_all(p, b.orders);

  p.node_gone("a");
  auto again = p.node_entered("a", 2, 8, 1, false);  // back after a loss: fresh ids
  CHECK(again.orders[1].first_id == 3);
  CHECK(again.orders[0].first_id == 3);  // reward ids after the topology's 3
  take_ids(again.orders, ids, envs);

  auto stranger = p.node_entered("extra", 2, 4, 0, false);
  CHECK_FALSE(stranger.in_topology);
  REQUIRE(stranger.orders.size() == 1);
  take_ids(stranger.orders, ids, envs);
  const auto up = p.scale_explorers(p.explorers_now() + 3, MembershipPlan::Clock::now());
  take_ids(up.start, ids, envs);
  CHECK(ids.size() == 3 + 2 + 2 + 3);

  // A node asking for more than its topology entry is given fresh ids too.
  MembershipPlan q(cfg);
  auto bigger = q.node_entered("a", 3, 8, 1, false);
  CHECK(bigger.orders[1].first_id == 3);
}

TEST_CASE("explorer ids a resumed log or a rejoined explorer used are never given out again",
          "[control][membership][resume]") {
  const auto cfg = topology();
  MembershipPlan p(cfg);
  p.resume({{1, 10}, {7, 3}});  // explorer 1 is node a's: a gets fresh ids
  auto a = p.node_entered("a", 2, 8, 0, false);
  CHECK(a.orders[0].first_id == 8);
  p.explorer_joined(40, "b", 1000, 8);  // rejoined with an id this plan never gave
  auto b = p.node_entered("x", 1, 8, 0, false);
  CHECK(b.orders[0].first_id == 41);
  CHECK(b.orders[0].first_env_id == 1008);
}

TEST_CASE("a scale-up puts each new explorer on the member node running the fewest", "[control][membership][scale]") {
  MembershipPlan p(topology());
  auto a = p.node_entered("a", 2, 8, 0, false);
  auto b = p.node_entered("b", 1, 8, 0, false);
  join_all(p, a.orders);  // b's explorer is ordered, not joined: it counts all the same
  CHECK(p.explorers_now() == 3);
  const auto s = p.scale_explorers(6, MembershipPlan::Clock::now());
  std::map<std::string, std::uint32_t> started;
  for (const auto& o : s.start) started[o.node] += o.count;
  CHECK(started["a"] == 1);
  CHECK(started["b"] == 2);
  CHECK(p.explorers_now() == 6);
  CHECK(s.said == "explorers 3 -> 6: started 1 on 'a', 2 on 'b'");
  // Without member nodes, this process runs them with the head's envs.
  MembershipPlan here(topology());
  const auto h = here.scale_explorers(2, MembershipPlan::Clock::now());
  REQUIRE(h.start.size() == 1);
  CHECK(h.start[0].node.empty());
  CHECK(h.start[0].envs_per_explorer == 4);
  CHECK(h.said == "explorers 0 -> 2: started 2 on 'head' (ids 3..4)");
}

TEST_CASE("a scale-down drains the newest running explorers and counts the ones still starting",
          "[control][membership][scale]") {
  MembershipPlan p(topology());
  auto a = p.node_entered("a", 2, 8, 0, false);
  auto b = p.node_entered("b", 1, 8, 0, false);
  join_all(p, a.orders);
  join_all(p, b.orders);
  auto s = p.scale_explorers(1, MembershipPlan::Clock::now());
  CHECK(s.drain == std::vector<std::uint32_t>{2, 1});
  CHECK(p.explorers_now() == 1);
  CHECK(p.explorer_left(2));        // retired
  CHECK_FALSE(p.explorer_left(0));  // died: not asked to go
  CHECK(p.explorers_now() == 0);
  // Ordered explorers cannot be drained yet: said so.
  p.node_entered("x", 2, 8, 0, false);
  s = p.scale_explorers(1, MembershipPlan::Clock::now());
  CHECK(s.drain.empty());
  CHECK(s.said.find("1 more are still starting") != std::string::npos);
}

TEST_CASE("reward workers go to the node running the fewest and leave the node running the most",
          "[control][membership][scale]") {
  MembershipPlan p(topology());
  p.node_entered("a", 0, 8, 1, false);
  p.node_entered("b", 0, 8, 2, false);
  CHECK(p.reward_workers() == 3);
  auto up = p.scale_rewards(5);
  REQUIRE(up.start.size() == 1);
  CHECK(up.start[0].node == "a");
  CHECK(up.start[0].count == 2);
  CHECK(up.start[0].first_id == 3);
  auto down = p.scale_rewards(1);
  CHECK(down.stop.at("a") + down.stop.at("b") == 4);
  CHECK(p.reward_workers() == 1);
  CHECK(p.scale_rewards(1).said == "reward workers unchanged (1)");
  // In a single-process run they start and stop here.
  MembershipPlan here(topology());
  here.spawned_here("b");
  CHECK(here.reward_workers() == 2);
  auto less = here.scale_rewards(0);
  CHECK(less.stop.at("") == 2);
}

TEST_CASE("a sync run sends a node the topology does not name away", "[control][membership]") {
  MembershipPlan p(topology(RunMode::sync));
  auto e = p.node_entered("stranger", 1, 8, 0, false);
  REQUIRE(e.refused);
  CHECK(e.orders.empty());
  CHECK(p.member_nodes() == 0);
  CHECK_FALSE(p.node_entered("a", 2, 8, 1, false).refused);
}

TEST_CASE("a node's ordered explorers are forgotten when it goes, and its joined ones are found by node",
          "[control][membership]") {
  MembershipPlan p(topology());
  p.node_entered("a", 2, 8, 0, false);
  CHECK(p.explorers_awaited() == 2);
  p.explorer_joined(0, "a", 0, 8);
  CHECK(p.explorers_now() == 2);
  CHECK(p.explorers_awaited() == 1);  // a stopping run waits for the other to join and drain
  CHECK(p.explorers_on("a") == std::vector<std::uint32_t>{0});
  p.node_gone("a");
  CHECK(p.explorers_now() == 1);  // the joined one leaves through explorer_left
  CHECK(p.explorers_awaited() == 0);  // nothing more will come from a node that went
  p.explorer_left(0);
  CHECK(p.explorers_now() == 0);
}

TEST_CASE("scaled-up and rejoined explorers are reported once, when their count at the learner grows",
          "[control][membership]") {
  MembershipPlan p(topology());
  const auto t0 = MembershipPlan::Clock::now();
  auto s = p.scale_explorers(1, t0);
  const auto id = s.start[0].first_id;
  p.await_first(9, t0, 5, "it rejoined");
  const auto later = t0 + std::chrono::seconds(2);
  CHECK(p.first_segments({{id, 0}, {9, 5}}, later).empty());
  auto first = p.first_segments({{id, 1}, {9, 6}}, later);
  REQUIRE(first.size() == 2);
  CHECK(first[0].seconds == Approx(2.0));
  CHECK(std::string(first[1].since_what) == "it rejoined");
  CHECK(p.first_segments({{id, 2}, {9, 7}}, later).empty());
}

TEST_CASE("autoscale measures from its first sample and asks at most once an interval", "[control][membership][autoscale]") {
  MembershipPlan p(topology());
  p.scale_explorers(2, MembershipPlan::Clock::now());
  AutoscaleConfig c;
  c.enabled = true;
  c.interval_s = 10;
  c.min_explorers = 1;
  c.max_explorers = 8;
  CHECK_FALSE(p.autoscale(c, {0, 0, 0, 0}));    // the mark
  CHECK_FALSE(p.autoscale(c, {5, 0.5, 10, 0}));  // too soon
  // The learner idle over 10 s: one more explorer.
  auto d = p.autoscale(c, {11, 1.0, 20, 0});
  REQUIRE(d);
  CHECK(d->explorers == 3);
  // Disabled: never.
  c.enabled = false;
  CHECK_FALSE(p.autoscale(c, {30, 1.0, 40, 0}));
}
