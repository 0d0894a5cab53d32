// `rlx workspace-tools`, the workspace episode an external harness drives
// over JSON lines: the expert's turns sent as a harness sends them restore
// the task and score 1; a harness that cheats (rewrites the tests, adds a
// conftest.py) scores 0 with the files scoring ignored named; lines that
// are no requests are answered, counted, and harm nothing after them. And
// the binary itself answers on its stdin and stdout.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/child_process.hpp"
#include "envs/workspace/tool_service.hpp"
#include "tests/envs/sandbox_fixture.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using json = nlohmann::json;

namespace {

json ask(WorkspaceToolService& s, const json& request) {
  const json reply = json::parse(s.answer(request.dump()));
  INFO(request.dump() << " -> " << reply.dump());
  REQUIRE(reply.is_object());
  return reply;
}

}  // namespace

TEST_CASE("the expert's turns sent over the tool service's JSON lines restore a task and score 1",
          "[envs][workspace][gateway][sandbox]") {
  const Sandbox box = test::open_sandbox();
  WorkspaceToolService service(box);
  const WorkspaceTask task = make_workspace_task(TaskSplit::held_out, 5, 2);
  const json started = ask(service, {{"op", "start"}, {"task", task.id}});
  REQUIRE(started["ok"] == true);
  CHECK(started["prompt"] == episode_prompt(task));
  CHECK(started["family"] == task_family(task));
  const auto turns = expert_turns(task);
  for (const auto& t : turns) {
    // A harness asks after each line whether the turn holds its call yet.
    CHECK(ask(service, {{"op", "complete"}, {"text", t.substr(0, t.size() - 1)}})["complete"] == false);
    CHECK(ask(service, {{"op", "complete"}, {"text", t}})["complete"] == true);
    const json r = ask(service, {{"op", "turn"}, {"text", t}});
    REQUIRE(r["ok"] == true);
    CHECK(r["kept"] == t.size());
    CHECK_THAT(r["observation"].get<std::string>(), Catch::StartsWith("[out]\n") && !Catch::Contains("error:"));
    CHECK(r["done"] == (&t == &turns.back()));
  }
  const json score = ask(service, {{"op", "score"}});
  INFO(score.dump());
  CHECK(score["failure"] == "none");
  CHECK(score["reward"] == 1.0);
  CHECK(score["solved"] == true);
  CHECK(score["end"] == "submitted");
  CHECK(score["tool_calls"] == turns.size());
  CHECK(ask(service, {{"op", "turn"}, {"text", "@list\n"}})["ok"] == false);  // the episode is over
  CHECK(service.bad_requests() == 1);
}

TEST_CASE("a harness that rewrites the tests or adds a conftest.py through the tool service scores 0, and the "
          "ignored files are named",
          "[envs][workspace][gateway][sandbox]") {
  const Sandbox box = test::open_sandbox();
  WorkspaceToolService service(box);
  const WorkspaceTask task = make_workspace_task(TaskSplit::train, 11, 1);
  REQUIRE(ask(service, {{"op", "start"}, {"task", task.id}})["ok"] == true);
  std::string visible_test;
  for (const auto& f : task.workspace)
    if (f.path.rfind("tests/test_", 0) == 0) visible_test = f.path;
  REQUIRE_FALSE(visible_test.empty());
  for (const std::string& t : {"@write " + visible_test + "\ndef test_ok():\n    pass\n@end\n",
                               std::string("@write conftest.py\nimport sys\n@end\n"), std::string("@run\n"),
                               std::string("@submit\n")}) {
    const json r = ask(service, {{"op", "turn"}, {"text", t}});
    CHECK(r["ok"] == true);
  }
  const json score = ask(service, {{"op", "score"}});
  INFO(score.dump());
  CHECK(score["failure"] == "none");
  CHECK(score["reward"] == 0.0);
  CHECK(score["solved"] == false);
  const auto ignored = score["ignored"].dump();
  CHECK_THAT(ignored, Catch::Contains(visible_test) && Catch::Contains("conftest.py"));
}

TEST_CASE("lines that are no requests get an error reply from the tool service, are counted, and the next "
          "episode still runs",
          "[envs][workspace][gateway]") {
  const Sandbox box = test::open_sandbox();
  WorkspaceToolService service(box);
  for (const std::string& bad :
       {std::string("garbage"), std::string("[1,2]"), std::string("{\"op\":7}"), std::string("{\"op\":\"fly\"}"),
        std::string("{\"op\":\"turn\",\"text\":\"@list\\n\"}"),  // before any start
        std::string("{\"op\":\"start\",\"task\":\"nowhere:1:1\"}"), std::string("{\"op\":\"start\"}"),
        std::string(5u << 20, '{')}) {
    const json r = json::parse(service.answer(bad));
    INFO(bad.substr(0, 60) << " -> " << r.dump());
    CHECK(r["ok"] == false);
    CHECK_FALSE(r["error"].get<std::string>().empty());
  }
  CHECK(service.bad_requests() == 8);
  REQUIRE(ask(service, {{"op", "start"}, {"task", "train:2:1"}})["ok"] == true);
  CHECK(ask(service, {{"op", "turn"}})["ok"] == false);  // no text
  const json r = ask(service, {{"op", "turn"}, {"text", "I will look around.\n@list\n"}});
  CHECK_THAT(r["observation"].get<std::string>(), Catch::Contains("README.md"));
  // A line whose text is not UTF-8 is no JSON: refused, never a throw.
  const json odd = json::parse(service.answer("{\"op\":\"turn\",\"text\":\"@read pkg/\xff\xfe.py\\n\"}"));
  CHECK(odd["ok"] == false);
  const json over = ask(service, {{"op", "out_of_budget"}});
  CHECK(over["end"] == "budget");
  CHECK(ask(service, {{"op", "score"}})["reward"] == 0.0);  // the holes are still there
}

TEST_CASE("rlx workspace-tools answers each line of its stdin on its stdout and exits at the end of input",
          "[envs][workspace][gateway][sandbox]") {
  const test::TempDir t("rlx-workspace-tools");
  const auto in_path = t.path / "in.jsonl", out_path = t.path / "out.jsonl";
  std::ofstream(in_path) << "{\"op\":\"start\",\"task\":\"train:3:1\"}\nnot json\n{\"op\":\"turn\",\"text\":\"@run\\n\"}\n"
                            "{\"op\":\"score\"}\n";
  const int in = ::open(in_path.c_str(), O_RDONLY), out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ChildOptions o;
  o.stdin_fd = in;
  o.stdout_fd = out;
  auto pid = spawn_child({RLX_BINARY, "workspace-tools", "--max-turns", "4"}, o);
  ::close(in);
  ::close(out);
  REQUIRE(pid.ok());
  const auto reaped = reap_children({*pid}, std::chrono::seconds(60));
  CHECK(reaped.at(0).clean);
  std::ifstream said(out_path);
  std::vector<json> replies;
  for (std::string line; std::getline(said, line);) replies.push_back(json::parse(line));
  REQUIRE(replies.size() == 4);
  CHECK(replies[0]["max_turns"] == 4);
  CHECK(replies[1]["ok"] == false);
  CHECK_THAT(replies[2]["observation"].get<std::string>(), Catch::Contains("failed"));
  CHECK(replies[3]["reward"] == 0.0);
  CHECK(replies[3]["failure"] == "none");
}
