// Agent episodes through the decoder (explorers/agent_batch.hpp): a
// scripted expert restores its tasks over several turns with the tools
// running between decoding steps, its observations land in the rows as
// context, and every sampled token's log-probability is the one a single
// pass over the whole episode gives; a random policy's episodes end at
// their budget or turn limit and still make a well-formed segment.
#include "tests/torch_catch.hpp"

#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/workspace_scorer.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/token_eval.hpp"
#include "explorers/token_rollout.hpp"
#include "messages/codec.hpp"
#include "policy/token_segment.hpp"
#include "policy/weights_io.hpp"
#include "tests/envs/sandbox_fixture.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

TransformerOptions agent_model(std::int64_t max_len) { return test::small_transformer(max_len, Tokenizer::characters()->vocab()); }

std::string row_text(const Generation& g, std::int64_t row, bool generated) {
  std::vector<std::int64_t> ids;
  auto gen = g.generated.accessor<bool, 2>();
  auto val = g.valid.accessor<bool, 2>();
  for (std::int64_t c = g.prompt_width; c < g.tokens.size(1); ++c)
    if (val[row][c] && gen[row][c] == generated) ids.push_back(g.tokens[row][c].item<std::int64_t>());
  return Tokenizer::characters()->decode(ids);
}

}  // namespace

TEST_CASE("a scripted expert restores its tasks turn by turn through the decoder: tools run between steps, "
          "observations are context, and every policy token is scored as one pass over the episode scores it",
          "[explorers][workspace][multi_turn][sandbox]") {
  const Sandbox box = test::open_sandbox(20.0);
  auto model = make_seeded_transformer(agent_model(4608), 9);
  std::vector<WorkspaceTask> tasks{make_workspace_task(TaskSplit::train, 4, 1),
                                   make_workspace_task(TaskSplit::held_out, 3, 2)};
  AgentOptions o;
  o.sample.max_new_tokens = 4000;
  o.sample.temperature = 1.0;
  o.turn_tokens = 600;
  AgentBatch batch(model, tasks, o, box);
  std::vector<std::vector<std::string>> turns{expert_turns(tasks[0]), expert_turns(tasks[1])};
  std::vector<std::size_t> next(2, 0);
  std::mt19937_64 rng(5);
  std::uint64_t version = 1;
  while (!batch.done()) {
    for (std::int64_t b = 0; b < 2; ++b)
      if (batch.at_turn_start(b) && next[b] < turns[b].size()) batch.script_turn(b, turns[b][next[b]++]);
    batch.step(rng, version);
    if (batch.decoder().steps() % 97 == 0) ++version;  // weights swap within turns and between them
  }
  auto g = batch.finish();

  const auto scorer = WorkspaceScorer::open();
  REQUIRE(scorer.ok());
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto& e = batch.episodes()[b];
    CHECK(e.end() == EpisodeEnd::submitted);
    CHECK(e.stats().turns == static_cast<int>(turns[b].size()));
    CHECK(e.stats().bad_calls == 0);
    CHECK(g.ended[b]);
    // The policy's tokens are exactly its turns; the rest of the completion
    // is exactly the observations of every turn but the last (the episode
    // ended there).
    std::string all_turns, observations;
    WorkspaceEpisode replay(tasks[b]);
    for (const auto& t : turns[b]) {
      all_turns += t;
      const auto out = replay.take_turn(t, box);
      if (!out.done) observations += out.observation;
    }
    CHECK(row_text(g, b, true) == all_turns);
    CHECK(row_text(g, b, false) == observations);
    auto r = (*scorer)->score(RewardRequestData{1, 0, e.task().id, e.payload()});
    CHECK(r.ok);
    CHECK(r.score == 1.0);
  }
  CHECK(batch.rows_busy() <= batch.rows_stepped());
  CHECK(batch.tool_seconds() > 0);

  torch::NoGradGuard guard;
  auto whole = model->forward(g.tokens, g.valid);
  CHECK(test::worst_log_prob_gap(g, whole.logits) < 1e-3);
  // Versions moved during the episodes; each sampled token kept its step's.
  CHECK(g.versions.max().item<std::int64_t>() > g.versions.masked_select(g.generated).min().item<std::int64_t>());
}

TEST_CASE("a random policy's agent rows make a segment whose rewards the pool scores from the changed files",
          "[explorers][workspace][multi_turn][sandbox]") {
  TokenRolloutOptions o;
  o.kind = "workspace";
  o.seed = 3;  // a seed under which one row finishes early and takes the next group's task
  o.rows = 4;  // two groups
  o.tokens.group_size = 2;
  o.tokens.max_new_tokens = 400;
  o.tokens.turn_tokens = 30;
  o.tokens.max_turns = 4;
  o.tokens.bad_call_cost = 0.25;
  o.policy = test::tiny_policy(1200);
  TokenRollout rollout(o);
  auto other = make_seeded_transformer(transformer_options(o.policy, Tokenizer::characters()->vocab()), 5);
  REQUIRE(rollout.load_weights(export_weights(*other, 3, "moe_transformer")).ok());
  bool complete = false;
  int steps = 0;
  while (!complete) {
    auto r = rollout.step();
    REQUIRE(r.ok());
    complete = *r;
    ++steps;
  }
  CHECK(steps <= 400);
  auto s = rollout.take_segment();
  REQUIRE(s.tokens);
  // Where the time went: decoding, and the turns' tool calls (each ended
  // turn is one, bad ones included); scoring is the reward pool's.
  CHECK(s.work.decode_s > 0);
  CHECK(s.work.tool_s > 0);
  CHECK(s.work.tool_calls >= 4);
  CHECK(s.work.score_s == 0);
  const auto& ids = s.tokens->task_ids;
  CHECK(ids[0] == ids[1]);  // a group: one task
  CHECK(ids[2] == ids[3]);
  CHECK(ids[0] != ids[2]);
  CHECK_THAT(ids[0], Catch::StartsWith("train:"));
  // Turns of at most 30 tokens, at most 4 of them: observations of bad
  // calls were appended between them.
  int observed = 0;
  for (auto x : s.tokens->observed) observed += x;
  CHECK(observed > 0);
  REQUIRE(rollout.deferred().size() == 4);
  for (const auto& d : rollout.deferred()) {
    CHECK_THAT(d.payload, Catch::StartsWith(ids[d.env] + "\n"));
    CHECK(d.t == s.tokens->prompt_width + s.episode_lengths[d.env] - 1);
    // Before its score comes, a row's reward is the cost of its refused
    // calls: a random policy's turns are cut before a call, so each costs
    // 0.25 (1 to 4 turns), at the row's last token and nowhere else.
    float row_sum = 0;
    for (std::uint32_t t = 0; t < s.num_steps; ++t) row_sum += s.rewards[t * s.num_envs + d.env];
    CHECK(s.rewards[d.t * s.num_envs + d.env] == row_sum);
    CHECK(s.episode_returns[d.env] == row_sum);
    const float calls = -row_sum / 0.25f;
    CHECK(calls == std::round(calls));
    CHECK(calls >= 1);
    CHECK(calls <= 4);
  }
  CHECK(decode<Segment>(encode(s, "test")).ok());
  // Episodes outlive segments: the group that finished first took the
  // next group's task, so tokens of v3 are in hand though no step of the next
  // segment is counted (what a restarted head's check must see).
  CHECK(rollout.steps_in_segment() == 0);
  REQUIRE(rollout.episodes_in_hand() > 0);
  CHECK(rollout.newest_in_hand() == 3);
  rollout.drop_segment();
  CHECK(rollout.episodes_in_hand() == 0);
  CHECK(rollout.newest_in_hand() == 0);
}

TEST_CASE("the workspace evaluator plays held-out and fresh training tasks greedily and reports them apart",
          "[explorers][workspace][eval][sandbox]") {
  auto model = make_seeded_transformer(agent_model(1200), 2);
  const auto scorer = WorkspaceScorer::open();
  REQUIRE(scorer.ok());
  TokenEvalOptions o;
  o.kind = "workspace";
  o.tasks = 2;
  o.batch = 2;
  o.agent.max_new_tokens = 300;
  o.agent.turn_tokens = 40;
  o.agent.max_turns = 3;
  auto ev = evaluate_tokens(model, **scorer, o);
  CHECK(ev.tasks == 2);
  CHECK(ev.train_tasks == 2);
  CHECK(ev.unscored == 0);
  CHECK(ev.pass_at_1 == 0.0);  // a random policy restores nothing
  CHECK(ev.mean_turns >= 1.0);
  CHECK(ev.mean_turns <= 3.0);
  int held = 0, train = 0;
  for (const auto& [family, counts] : ev.by_family) {
    if (family.rfind("held_out/t", 0) == 0) held += counts.second;
    if (family.rfind("train/t", 0) == 0) train += counts.second;
  }
  CHECK(held == 2);
  CHECK(train == 2);
  // The first episode of each split, as played, for the log.
  REQUIRE(ev.episodes.size() == 2);
  CHECK_THAT(ev.episodes[0], Catch::StartsWith("held_out:0:1 -> "));
  CHECK_THAT(ev.episodes[1], Catch::StartsWith("train:"));
  CHECK_THAT(ev.episodes[0], Catch::Contains("[out]\n"));

  // A model too short for the prompts plays nothing and says so: unscored, no crash.
  auto short_model = make_seeded_transformer(agent_model(400), 2);
  auto none = evaluate_tokens(short_model, **scorer, o);
  CHECK(none.tasks == 2);
  CHECK(none.unscored == 4);
  REQUIRE_FALSE(none.samples.empty());
  CHECK_THAT(none.samples.front(), Catch::Contains("do not fit policy.max_len"));
}
