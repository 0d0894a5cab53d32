// Recovery drills: a drill that starts with a mistake a policy was seen
// making (a path or a function's name cut short, an edit without its
// name), refused for real by the tools, then the expert's read and fix.
// The mistake is context, never a target; played, the drill restores the
// module.
#include <map>

#include <catch2/catch.hpp>

#include "envs/workspace/workspace_episode.hpp"
#include "tests/envs/sandbox_fixture.hpp"

using namespace rlx;

TEST_CASE("a recovery drill plays a refused mistake as context, then the plain drill's read and fix as targets",
          "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  std::map<Mistake, int> made;
  int asked = 0;
  for (const std::uint64_t seed : {5u, 17u}) {
    const WorkspaceTask task = make_workspace_task(TaskSplit::train, seed, 2);
    for (std::size_t f = 0; f < task.functions.size(); ++f) {
      const WorkspaceTask drill = single_hole_task(task, f);
      const std::string path = "pkg/" + task.functions[f].module + ".py";
      const std::string& name = task.functions[f].name;
      for (const Mistake mistake : {Mistake::wrong_path, Mistake::wrong_name, Mistake::no_name}) {
        const Transcript plain = expert_drill(drill, box, mistake != Mistake::wrong_path);
        REQUIRE(plain.parts.size() == 3);
        for (int cut = 1; cut <= 3; ++cut) {
          ++asked;
          const auto r = recovery_drill(drill, box, mistake, cut);
          if (!r) continue;
          ++made[mistake];
          INFO(path << " " << name << " mistake " << static_cast<int>(mistake) << " cut " << cut);
          // The targets are the plain drill's read and fix, in that order; the fix ends it.
          std::vector<std::string> targets;
          for (std::size_t i = 0; i < r->parts.size(); ++i)
            if (r->target(i)) targets.push_back(r->parts[i]);
          CHECK(targets == std::vector<std::string>{plain.parts[0], plain.parts[2]});
          CHECK(r->parts.back() == plain.parts[2]);
          CHECK(r->parts.size() % 2 == 1);
          // Each mistake is a turn, refused: the observation after it is an error.
          REQUIRE_FALSE(r->mistaken.empty());
          for (const std::size_t i : r->mistaken) {
            CHECK(i % 2 == 0);
            REQUIRE(i + 1 < r->parts.size());
            CHECK_THAT(r->parts[i + 1], Catch::StartsWith("[out]\nerror: "));
            CHECK_FALSE(r->target(i + 1));
          }
          const std::string& first = r->parts[r->mistaken.front()];
          const std::string& error = r->parts[r->mistaken.front() + 1];
          switch (mistake) {
            case Mistake::wrong_path:
              CHECK(r->mistaken == std::vector<std::size_t>{0});
              CHECK(first == "@read " + path.substr(0, path.size() - 3 - static_cast<std::size_t>(cut)) + ".py\n");
              CHECK_THAT(error, Catch::Contains("files beside it: ") && Catch::Contains(path));
              break;
            case Mistake::wrong_name:
              CHECK(r->mistaken == std::vector<std::size_t>{2});
              CHECK_THAT(first, Catch::StartsWith("@replace " + path + " " + name.substr(0, name.size() - cut) + "\n"));
              CHECK_THAT(error, Catch::Contains("no function " + name.substr(0, name.size() - cut)) && Catch::Contains(name));
              break;
            case Mistake::no_name:
              CHECK(r->mistaken == std::vector<std::size_t>{2, 4});
              CHECK(first == "@replace " + path + "\n");
              CHECK_THAT(error, Catch::Contains("@replace PATH NAME"));
              CHECK_THAT(r->parts[5], Catch::Contains("\"@end\" closes a @write or @replace; there is none open"));
              break;
          }
          // Played turn by turn, the mistakes are counted bad calls and the fix restores the module.
          WorkspaceEpisode played(drill);
          for (std::size_t i = 0; i < r->parts.size(); i += 2) played.take_turn(r->parts[i], box);
          CHECK(played.stats().bad_calls == static_cast<int>(r->mistaken.size()));
          for (const auto& whole : task.solution)
            if (whole.path == path) CHECK(*played.files().find(path) == whole.text);
        }
      }
    }
  }
  // A cut name that is a real one makes no drill; that is rare.
  INFO(asked << " asked");
  for (const Mistake m : {Mistake::wrong_path, Mistake::wrong_name, Mistake::no_name}) CHECK(made[m] * 10 >= asked / 3 * 9);
  CHECK(made[Mistake::no_name] == asked / 3);  // nothing to cut: always made
}
