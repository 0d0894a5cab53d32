// Agent episodes with continuous batching (explorers/agent_pool.hpp): more
// tasks than rows, a row taking the next task as soon as its episode
// ends; a scripted expert still restores every task, each finished
// episode's tokens are exactly its turns and observations, and every
// sampled token's log-probability is what one pass over its episode gives.
#include "tests/torch_catch.hpp"

#include <deque>
#include <set>

#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/workspace_scorer.hpp"
#include "explorers/agent_pool.hpp"
#include "tests/envs/sandbox_fixture.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

TEST_CASE("a pool of two rows plays five scripted experts' episodes, each row refilled as its episode ends, and "
          "every episode restores its task with its tokens scored as one pass over it scores them",
          "[explorers][workspace][continuous][sandbox]") {
  const Sandbox box = test::open_sandbox(20.0);
  auto model = make_seeded_transformer(test::small_transformer(4096, Tokenizer::characters()->vocab()), 9);
  std::deque<WorkspaceTask> tasks;
  for (std::uint64_t s = 1; s <= 5; ++s) tasks.push_back(make_workspace_task(s % 2 ? TaskSplit::train : TaskSplit::held_out, s, 1 + static_cast<int>(s % 2)));
  std::map<std::string, std::vector<std::string>> turns_of;
  for (const auto& t : tasks) turns_of[t.id] = expert_turns(t);
  AgentOptions o;
  o.sample.max_new_tokens = 3500;
  o.turn_tokens = 600;
  AgentPool pool(model, 2, o, box, [&]() -> std::optional<WorkspaceTask> {
    if (tasks.empty()) return std::nullopt;
    auto t = std::move(tasks.front());
    tasks.pop_front();
    return t;
  }, /*chunk=*/32);
  std::map<std::string, std::size_t> next;
  std::mt19937_64 rng(5);
  std::uint64_t version = 1;
  std::vector<AgentPool::Finished> done;
  while (pool.step(rng, version)) {
    if (pool.decoder().steps() % 97 == 0) ++version;
    for (auto& f : pool.take_finished()) done.push_back(std::move(f));
    for (std::int64_t r = 0; r < 2; ++r) {
      if (!pool.at_turn_start(r)) continue;
      const auto& id = pool.episode(r).task().id;
      auto& n = next[id];
      if (n < turns_of[id].size()) pool.script_turn(r, turns_of[id][n++]);
    }
  }
  for (auto& f : pool.take_finished()) done.push_back(std::move(f));
  REQUIRE(done.size() == 5);
  CHECK(pool.running() == 0);
  // Two rows, five episodes of different lengths: rows were refilled, so
  // both were busy until the last episode (utilisation near 1).
  CHECK(pool.rows_busy() > pool.rows_stepped() * 8 / 10);

  const auto scorer = WorkspaceScorer::open();
  REQUIRE(scorer.ok());
  std::vector<Sequence> sequences;
  std::set<std::string> ids;
  for (auto& f : done) {
    const auto& e = f.episode;
    INFO(e.task().id);
    ids.insert(e.task().id);
    CHECK(e.end() == EpisodeEnd::submitted);
    CHECK(e.stats().bad_calls == 0);
    auto r = (*scorer)->score(RewardRequestData{1, 0, e.task().id, e.payload()});
    CHECK(r.score == 1.0);
    // The policy's tokens are exactly the turns, the rest of the completion the observations.
    std::string turns, observations;
    WorkspaceEpisode replay(e.task());
    for (const auto& t : turns_of[e.task().id]) {
      turns += t;
      const auto out = replay.take_turn(t, box);
      if (!out.done) observations += out.observation;
    }
    std::vector<std::int64_t> mine, theirs;
    for (std::size_t i = static_cast<std::size_t>(f.sequence.prompt_length); i < f.sequence.tokens.size(); ++i)
      (f.sequence.generated[i] ? mine : theirs).push_back(f.sequence.tokens[i]);
    CHECK(Tokenizer::characters()->decode(mine) == turns);
    CHECK(Tokenizer::characters()->decode(theirs) == observations);
    sequences.push_back(f.sequence);
  }
  CHECK(ids.size() == 5);

  const auto g = generation_of(sequences, model->options().layers, model->options().top_k, Tokenizer::characters()->pad());
  torch::NoGradGuard guard;
  auto whole = model->forward(g.tokens, g.valid);
  CHECK(test::worst_log_prob_gap(g, whole.logits) < 1e-3);
  CHECK(route_mismatch(whole.routes, g.routes, g.valid) == 0.0);
}
