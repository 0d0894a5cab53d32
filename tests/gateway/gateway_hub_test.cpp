// The gateway's hub (gateway/gateway_hub.hpp): turns queued and answered,
// sessions assembled into trajectories from the exact tokens sampled,
// history rewrites detected, groups going out whole or not at all, lost
// sessions counted and never trained. No model: the decoding side is
// played by hand.
#include <thread>

#include <catch2/catch.hpp>

#include "gateway/gateway_hub.hpp"

using namespace rlx;

namespace {

// What a decoding row gives back: the prompt (context), then `sampled`
// (the policy's, version `version`, log-probability -0.5 each); routes of
// width 2, each token's (id, id).
TokenTrace hub_test_row(const std::vector<std::int64_t>& prompt, const std::vector<std::int64_t>& sampled,
                        std::int64_t version) {
  TokenTrace t;
  t.route_width = 2;
  for (auto id : prompt) {
    t.tokens.push_back(id);
    t.generated.push_back(0);
    t.log_probs.push_back(0);
    t.versions.push_back(0);
  }
  for (auto id : sampled) {
    t.tokens.push_back(id);
    t.generated.push_back(1);
    t.log_probs.push_back(-0.5F);
    t.versions.push_back(version);
  }
  for (auto id : t.tokens) t.routes.insert(t.routes.end(), {id, id});
  return t;
}

// Plays the explorer for the one queued turn: answers it with `sampled`.
std::shared_ptr<GatewayTurn> hub_test_answer(GatewayHub& hub, const std::vector<std::int64_t>& sampled,
                                             std::int64_t version) {
  auto turns = hub.take_turns(1, std::chrono::milliseconds(0));
  REQUIRE(turns.size() == 1);
  for (auto id : sampled) turns[0]->append(id, -0.5F, version);
  hub.finished(turns[0], hub_test_row(turns[0]->spec().prompt, sampled, version), "stop", "text");
  return turns[0];
}

TurnSpec hub_test_turn(std::vector<std::int64_t> prompt, std::uint64_t session) {
  TurnSpec s;
  s.prompt = std::move(prompt);
  s.max_tokens = 8;
  s.session = session;
  return s;
}

}  // namespace

TEST_CASE("a session's turns join one trajectory: prompts and tool output as context, completions as the policy's, "
          "each with its version, and an eos that text could not carry leaves it",
          "[gateway]") {
  GatewayHub hub;
  auto s = hub.open("task-a", "");
  REQUIRE(s.ok());
  auto t1 = hub.submit(hub_test_turn({5, 6, 7}, *s));
  REQUIRE(t1.ok());
  hub_test_answer(hub, {8, 9, 1}, 3);  // ends with eos (1)
  const auto seen = (*t1)->wait(0, std::chrono::steady_clock::now());
  CHECK(seen.done);
  CHECK(seen.ids == std::vector<std::int64_t>{8, 9, 1});
  CHECK(seen.versions == std::vector<std::int64_t>{3, 3, 3});
  // The harness sends text back: the eos is not in its prompt.
  auto t2 = hub.submit(hub_test_turn({5, 6, 7, 8, 9, 20, 21}, *s));
  REQUIRE(t2.ok());
  hub_test_answer(hub, {30, 31}, 4);
  CHECK(hub.counts().eos_dropped == 1);
  CHECK(hub.counts().prefix_mismatch == 0);
  CHECK(hub.take_groups(1, 16).empty());  // not rewarded yet
  REQUIRE(hub.reward(*s, 0.75F, false).ok());
  const auto rows = hub.take_groups(1, 16);
  REQUIRE(rows.size() == 1);
  const auto& r = rows[0];
  CHECK(r.task_id == "task-a");
  CHECK(r.reward == 0.75F);
  CHECK(r.failure == InfraFailure::none);
  CHECK(r.prompt_length == 3);
  CHECK(r.trace.tokens == std::vector<std::int64_t>{5, 6, 7, 8, 9, 20, 21, 30, 31});
  CHECK(r.trace.generated == std::vector<std::uint8_t>{0, 0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(r.trace.versions == std::vector<std::int64_t>{0, 0, 0, 3, 3, 0, 0, 4, 4});
  CHECK(r.trace.routes.size() == 2 * r.trace.size());
  CHECK(r.trace.routes[2 * 7] == 30);  // each token keeps its own routes
  CHECK(hub.open_sessions() == 0);
  CHECK(hub.counts().sessions_rewarded == 1);
}

TEST_CASE("a turn that does not extend its session's tokens is counted in prefix_mismatch and the trajectory starts "
          "again from it, never trained misaligned",
          "[gateway]") {
  GatewayHub hub;
  auto s = hub.open("task-b", "");
  REQUIRE(s.ok());
  REQUIRE(hub.submit(hub_test_turn({5, 6}, *s)).ok());
  hub_test_answer(hub, {8, 9}, 1);
  // History rewritten: 8 became 7.
  REQUIRE(hub.submit(hub_test_turn({5, 6, 7, 9, 10}, *s)).ok());
  hub_test_answer(hub, {11}, 2);
  CHECK(hub.counts().prefix_mismatch == 1);
  REQUIRE(hub.reward(*s, 1.0F, false).ok());
  const auto rows = hub.take_groups(1, 4);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].trace.tokens == std::vector<std::int64_t>{5, 6, 7, 9, 10, 11});
  CHECK(rows[0].trace.generated == std::vector<std::uint8_t>{0, 0, 0, 0, 0, 1});
  CHECK(rows[0].prompt_length == 5);
}

TEST_CASE("a group goes to the learner whole once every session in it is rewarded, and a lost session drops its "
          "group, counted",
          "[gateway]") {
  GatewayHubOptions o;
  o.group_size = 2;
  o.session_timeout = std::chrono::seconds(60);
  GatewayHub hub(o);
  const auto nameless = hub.open("task", "");
  REQUIRE_FALSE(nameless.ok());
  CHECK(nameless.error().code == Errc::invalid_field);
  CHECK(nameless.error().message.find("group_id") != std::string::npos);

  auto play = [&](const std::string& group) {
    auto s = hub.open("task-" + group, group);
    REQUIRE(s.ok());
    REQUIRE(hub.submit(hub_test_turn({4, 5}, *s)).ok());
    hub_test_answer(hub, {6}, 1);
    return *s;
  };
  const auto a1 = play("g1"), a2 = play("g1");
  const auto b1 = play("g2");
  const auto c1 = play("g1");  // g1 had two: a new group of that id
  REQUIRE(hub.reward(a1, 1.0F, false).ok());
  CHECK(hub.ready_rows() == 0);  // its group waits for a2
  REQUIRE(hub.reward(a2, 0.0F, true).ok());  // the harness's own machinery failed: masked, still in the group
  CHECK(hub.ready_rows() == 2);
  CHECK(hub.take_groups(3, 8).empty());  // fewer rows ready than asked for
  // b1's partner never comes and b1 goes idle: lost, and its group with it.
  const auto b2 = play("g2");
  REQUIRE(hub.reward(b2, 1.0F, false).ok());
  hub.expire(std::chrono::steady_clock::now() + std::chrono::seconds(61));
  CHECK(hub.counts().sessions_lost == 2);  // b1, and c1 (idle too)
  CHECK(hub.counts().groups_dropped == 2);
  CHECK_FALSE(hub.reward(b1, 1.0F, false).ok());  // gone
  CHECK(hub.reward(c1, 1.0F, false).error().code == Errc::not_found);
  const auto rows = hub.take_groups(2, 8);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].session == a1);
  CHECK(rows[1].session == a2);
  CHECK(rows[1].failure == InfraFailure::harness_failed);
  CHECK(hub.counts().sessions_failed == 1);
  CHECK(hub.counts().groups_ready == 1);
  CHECK(hub.open_sessions() == 0);
}

TEST_CASE("the hub refuses what it cannot take: an unknown session, a second turn while one is under way, a reward "
          "before any completion, a full queue, and a closing hub fails the turns that wait",
          "[gateway]") {
  GatewayHubOptions o;
  o.max_queued_turns = 2;
  GatewayHub hub(o);
  CHECK(hub.submit(hub_test_turn({1, 2}, 99)).error().code == Errc::not_found);
  auto s = hub.open("t", "");
  REQUIRE(s.ok());
  CHECK(hub.reward(*s, 1.0F, false).error().code == Errc::refused);  // nothing to reward yet
  auto first = hub.submit(hub_test_turn({3}, *s));
  REQUIRE(first.ok());
  CHECK(hub.submit(hub_test_turn({3}, *s)).error().code == Errc::refused);  // one turn at a time
  auto other = hub.submit(hub_test_turn({4}, 0));
  REQUIRE(other.ok());
  const auto full = hub.submit(hub_test_turn({5}, 0));
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code == Errc::busy);
  CHECK(hub.counts().busy == 1);

  // A client waiting on its turn is woken by the close, with the reason.
  std::thread waiter([turn = *other] {
    const auto v = turn->wait(0, std::chrono::steady_clock::now() + std::chrono::minutes(5));
    CHECK(v.done);
    CHECK(v.error == "the run is stopping");
  });
  hub.close("the run is stopping");
  waiter.join();
  CHECK((*first)->wait(0, std::chrono::steady_clock::now()).error == "the run is stopping");
  CHECK(hub.counts().turns_failed == 2);
  CHECK(hub.submit(hub_test_turn({3}, *s)).error().code == Errc::busy);
  CHECK(hub.take_turns(4, std::chrono::milliseconds(0)).empty());
}

TEST_CASE("a client that gave up on its turn leaves its session as it was", "[gateway]") {
  GatewayHub hub;
  auto s = hub.open("t", "");
  REQUIRE(s.ok());
  auto turn = hub.submit(hub_test_turn({3, 4}, *s));
  REQUIRE(turn.ok());
  (*turn)->cancel();
  hub_test_answer(hub, {5}, 1);
  CHECK(hub.counts().turns_cancelled == 1);
  CHECK(hub.reward(*s, 1.0F, false).error().code == Errc::refused);  // the cancelled completion joined nothing
  REQUIRE(hub.submit(hub_test_turn({3, 4}, *s)).ok());
  hub_test_answer(hub, {6}, 1);
  REQUIRE(hub.reward(*s, 1.0F, false).ok());
  const auto rows = hub.take_groups(1, 1);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].trace.tokens == std::vector<std::int64_t>{3, 4, 6});
}

TEST_CASE("gateway counts cross nodes as a vector of every field, a vector of another length is refused, and counts add "
          "field by field",
          "[gateway]") {
  GatewayCounts a;
  a.turns = 1;
  a.sessions_rewarded = 7;
  a.trajectories_taken = 14;
  const auto v = gateway_counts_vector(a);
  CHECK(v.size() == sizeof(GatewayCounts) / sizeof(std::uint64_t));
  auto back = gateway_counts_from(v);
  REQUIRE(back.ok());
  CHECK(back->turns == 1);
  CHECK(back->sessions_rewarded == 7);
  CHECK(back->trajectories_taken == 14);
  auto shorter = v;
  shorter.pop_back();
  CHECK_FALSE(gateway_counts_from(shorter).ok());
  CHECK_FALSE(gateway_counts_from({}).ok());
  GatewayCounts sum = a;
  sum += *back;
  CHECK(sum.turns == 2);
  CHECK(sum.sessions_rewarded == 14);
  CHECK(sum.trajectories_taken == 28);
  CHECK(sum.busy == 0);
}
