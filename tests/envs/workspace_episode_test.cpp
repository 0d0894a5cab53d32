// A workspace episode turn by turn: the expert's transcript restores the
// task and scores 1 on held-out and training tasks alike; the turn limit,
// the token budget and bad calls end or count as they say; text decoded
// past a call is not part of the turn.
#include <algorithm>

#include <catch2/catch.hpp>

#include "envs/workspace/workspace_episode.hpp"
#include "envs/workspace/workspace_scorer.hpp"
#include "tests/envs/sandbox_fixture.hpp"

using namespace rlx;

TEST_CASE("the expert's turns restore a task and its hidden tests score 1", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  for (const auto& [split, seed, difficulty] : {std::tuple{TaskSplit::train, 3, 1}, std::tuple{TaskSplit::held_out, 8, 3}}) {
    WorkspaceEpisode episode(make_workspace_task(split, static_cast<std::uint64_t>(seed), difficulty));
    CHECK_THAT(episode.prompt(), Catch::Contains("@submit"));
    CHECK_THAT(episode.prompt(), Catch::Contains("must be restored"));
    const auto turns = expert_turns(episode.task());
    REQUIRE(turns.size() >= 4 + static_cast<std::size_t>(difficulty));
    std::string last;
    for (const auto& t : turns) {
      REQUIRE(WorkspaceEpisode::turn_complete(t));
      REQUIRE_FALSE(episode.done());
      const TurnOutcome o = episode.take_turn(t, box);
      CHECK(o.kept == t.size());
      CHECK_THAT(o.observation, Catch::StartsWith("[out]\n") && Catch::EndsWith("[end]\n"));
      CHECK_THAT(o.observation, !Catch::Contains("error:"));
      last = o.observation;
      if (&t == &turns.front()) CHECK_THAT(o.observation, Catch::Contains("NotImplementedError"));
    }
    CHECK(episode.done());
    CHECK(episode.end() == EpisodeEnd::submitted);
    CHECK(episode.stats().turns == static_cast<int>(turns.size()));
    CHECK(episode.stats().tool_calls == static_cast<int>(turns.size()));
    CHECK(episode.stats().bad_calls == 0);
    CHECK(episode.stats().runs == 2);
    CHECK(episode.stats().hole_file_calls == static_cast<int>(turns.size()) - 3);  // all but run, run, submit
    auto changes = decode_changes(episode.payload());
    REQUIRE(changes.ok());
    const WorkspaceScore s = score_workspace(box, episode.task(), *changes);
    INFO(s.reason);
    CHECK(s.reward == 1.0);
    CHECK(s.solved);
  }
}

TEST_CASE("an episode ends at its turn limit or its budget, and counts the calls that could not run", "[envs][workspace]") {
  const Sandbox box = test::open_sandbox();
  EpisodeLimits limits;
  limits.max_turns = 3;
  WorkspaceEpisode episode(make_workspace_task(TaskSplit::train, 4, 1), limits);
  // Text decoded past the call is not the turn's.
  const TurnOutcome first = episode.take_turn("Let me see.\n@list\nand then more", box);
  CHECK(first.kept == std::string("Let me see.\n@list\n").size());
  CHECK_THAT(first.observation, Catch::Contains("README.md"));
  const TurnOutcome bad = episode.take_turn("I am not sure what to do", box);
  CHECK(bad.kept == std::string("I am not sure what to do").size());
  CHECK_THAT(bad.observation, Catch::Contains("error: no tool call"));
  CHECK_FALSE(bad.done);
  episode.take_turn("@read ../secret\n", box);
  CHECK(episode.done());
  CHECK(episode.end() == EpisodeEnd::turn_limit);
  CHECK(episode.stats().turns == 3);
  CHECK(episode.stats().tool_calls == 1);
  CHECK(episode.stats().bad_calls == 2);
  CHECK(episode.stats().hole_file_calls == 0);
  CHECK(episode.take_turn("@submit\n", box).done);
  CHECK(episode.stats().turns == 3);  // nothing happens after the end
  CHECK(episode.payload().empty());   // nothing changed

  // A call counts as on a hole's file when it ran on the module the README names, and only then.
  const WorkspaceTask task = make_workspace_task(TaskSplit::train, 4, 1);
  const std::string hole_module = task.holes.front().substr(0, task.holes.front().find('.'));
  std::string other_module;
  for (const auto& f : task.functions)
    if (f.module != hole_module) other_module = f.module;
  REQUIRE_FALSE(other_module.empty());
  WorkspaceEpisode reading(task);
  reading.take_turn("@read pkg/" + other_module + ".py\n", box);
  reading.take_turn("@read pkg/" + hole_module + "x.py\n", box);  // no such file: a bad call
  CHECK(reading.stats().hole_file_calls == 0);
  reading.take_turn("@read pkg/" + hole_module + ".py 1-5\n", box);
  CHECK(reading.stats().hole_file_calls == 1);
  CHECK(reading.stats().bad_calls == 1);

  WorkspaceEpisode cut(make_workspace_task(TaskSplit::train, 4, 1));
  cut.take_turn("@write notes.txt\nhalf a pl", box);
  cut.out_of_budget();
  CHECK(cut.end() == EpisodeEnd::budget);
  CHECK(cut.failure() == InfraFailure::none);
}

TEST_CASE("the expert's transcript alternates its turns with their observations and stops at its submit",
          "[envs][workspace][sandbox][sft]") {
  const Sandbox box = test::open_sandbox();
  const auto task = make_workspace_task(TaskSplit::train, 5, 2);
  const Transcript t = expert_transcript(task, box);
  CHECK(t.end == EpisodeEnd::submitted);
  CHECK(t.failure == InfraFailure::none);
  CHECK(t.prompt == WorkspaceEpisode(task).prompt());
  const auto turns = expert_turns(task);
  REQUIRE(t.parts.size() == 2 * turns.size() - 1);
  for (std::size_t i = 0; i < t.parts.size(); ++i) {
    if (i % 2 == 0) CHECK(t.parts[i] == turns[i / 2]);
    else CHECK_THAT(t.parts[i], Catch::StartsWith("[out]\n") && Catch::EndsWith("[end]\n"));
  }
  CHECK(t.parts.back() == "@submit\n");
  // A turn limit below the expert's turns ends the transcript there, unsubmitted.
  const Transcript cut = expert_transcript(task, box, EpisodeLimits{2});
  CHECK(cut.end == EpisodeEnd::turn_limit);
  CHECK(cut.parts.size() == 3);
}

TEST_CASE("a drill makes any one function the hole, and its read and fix restore exactly that body",
          "[envs][workspace]") {
  const Sandbox box = test::open_sandbox();
  for (const std::uint64_t seed : {5u, 17u}) {
    const WorkspaceTask task = make_workspace_task(TaskSplit::train, seed, 2);
    for (std::size_t f = 0; f < task.functions.size(); ++f) {
      const WorkspaceTask drill = single_hole_task(task, f);
      const std::string path = "pkg/" + task.functions[f].module + ".py";
      REQUIRE(drill.holes == std::vector<std::string>{task.functions[f].module + "." + task.functions[f].name});
      // One line differs from the solution, in the hole's module only: the body, now the raise.
      int differing = 0;
      for (const auto& file : drill.workspace)
        for (const auto& whole : task.solution) {
          if (whole.path != file.path) continue;
          const auto a = split_lines(file.text), b = split_lines(whole.text);
          REQUIRE(a.size() == b.size());
          for (std::size_t i = 0; i < a.size(); ++i)
            if (a[i] != b[i]) {
              ++differing;
              CHECK(file.path == path);
              CHECK_THAT(a[i], Catch::Contains("raise NotImplementedError"));
              CHECK_THAT(b[i], Catch::StartsWith("    return "));
              // the body line follows this function's docstring, not another's
              std::size_t def = i;
              while (def > 0 && b[def].rfind("def ", 0) != 0) --def;
              CHECK_THAT(b[def], Catch::StartsWith("def " + task.functions[f].name + "("));
            }
        }
      CHECK(differing == 1);
      for (const auto& file : drill.workspace)
        if (file.path == "README.md") CHECK_THAT(file.text, Catch::Contains("`" + drill.holes[0] + "`"));

      // The drill: read the module, then the one fix; played, it restores the module whole.
      const Transcript t = expert_drill(drill, box);
      REQUIRE(t.parts.size() == 3);
      CHECK(t.parts[0] == "@read " + path + "\n");
      CHECK_THAT(t.parts[1], Catch::StartsWith("[out]\n") && Catch::Contains("restore this function"));
      CHECK_THAT(t.parts[2], Catch::StartsWith("@replace " + path + " "));
      CHECK(t.end == EpisodeEnd::running);  // nothing submitted: the fix ends the drill unplayed
      WorkspaceEpisode played(drill);
      played.take_turn(t.parts[0], box);
      const TurnOutcome fixed = played.take_turn(t.parts[2], box);
      CHECK_THAT(fixed.observation, !Catch::Contains("error:"));
      for (const auto& whole : task.solution)
        if (whole.path == path) {
          REQUIRE(played.files().find(path) != nullptr);
          CHECK(*played.files().find(path) == whole.text);
        }

      // Focused: the read covers the hole's function alone, from its def to its raise.
      const Transcript focused = expert_drill(drill, box, true);
      REQUIRE(focused.parts.size() == 3);
      CHECK_THAT(focused.parts[0], Catch::StartsWith("@read " + path + " "));
      CHECK_THAT(focused.parts[1], Catch::Contains("def " + task.functions[f].name + "(") &&
                                       Catch::EndsWith("raise NotImplementedError(\"restore this function\")\n[end]\n"));
      CHECK(std::count(focused.parts[1].begin(), focused.parts[1].end(), '\n') <= 12);
      CHECK(focused.parts[2] == t.parts[2]);
    }
  }
}

TEST_CASE("an episode counts the holes whose body it rewrote, rightly or wrongly, and no other edit",
          "[envs][workspace]") {
  const Sandbox box = test::open_sandbox();
  const WorkspaceTask task = make_workspace_task(TaskSplit::train, 3, 2);
  REQUIRE(task.holes.size() == 2);
  WorkspaceEpisode e(task);
  CHECK(e.holes_rewritten() == 0);
  // Another function's body: no hole rewritten.
  const auto other = std::find_if(task.functions.begin(), task.functions.end(), [&](const PyFunction& f) {
    return std::find(task.holes.begin(), task.holes.end(), f.module + "." + f.name) == task.holes.end();
  });
  REQUIRE(other != task.functions.end());
  const auto replaced = [&](const std::string& p, const std::string& n, const std::string& body) {
    return e.take_turn("@replace " + p + " " + n + "\n" + body + "@end\n", box).observation;
  };
  CHECK_THAT(replaced("pkg/" + other->module + ".py", other->name, "    return 0\n"), !Catch::Contains("error:"));
  CHECK(e.holes_rewritten() == 0);
  // A wrong body counts: the edit got in.
  CHECK_THAT(replaced(hole_path(task.holes[0]), hole_function(task.holes[0]), "    return 0\n"), !Catch::Contains("error:"));
  CHECK(e.holes_rewritten() == 1);
  // The raise put back is no rewrite.
  CHECK_THAT(replaced(hole_path(task.holes[0]), hole_function(task.holes[0]), "    raise NotImplementedError(\"restore this function\")\n"),
             !Catch::Contains("error:"));
  CHECK(e.holes_rewritten() == 0);
  for (const auto& turn : expert_turns(task))
    if (turn.rfind("@replace ", 0) == 0) e.take_turn(turn, box);
  CHECK(e.holes_rewritten() == 2);
}
