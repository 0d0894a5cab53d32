// The agent's tools in a workspace episode: the call format as a policy
// writes it token by token, each tool on the episode's private copy, the
// limits no call can pass, and an expert episode from the first look to a
// submit that the hidden tests score 1.
#include <catch2/catch.hpp>

#include "envs/workspace/agent_tools.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "envs/workspace/workspace_scorer.hpp"
#include "tests/envs/sandbox_fixture.hpp"
#include "tests/envs/tool_call_fixture.hpp"

using namespace rlx;

TEST_CASE("a tool call is complete with its newline, or with its @end line for a write", "[envs][workspace]") {
  CHECK(parse_turn("I will look at the files first.\n@li", false).state == ParsedTurn::State::incomplete);
  CHECK(parse_turn("@list", false).state == ParsedTurn::State::incomplete);
  const ParsedTurn list = parse_turn("Look first.\n@list\nmore text after the call", false);
  REQUIRE(list.state == ParsedTurn::State::call);
  CHECK(list.call.kind == ToolKind::list);
  CHECK(list.end == std::string("Look first.\n@list\n").size());

  const ToolCall read = test::parsed_call("@read pkg/ledger.py 3-12\n");
  CHECK(read.kind == ToolKind::read);
  CHECK(read.path == "pkg/ledger.py");
  CHECK((read.first == 3 && read.last == 12));
  CHECK(test::parsed_call("@read  README.md \n").first == 0);

  CHECK(parse_turn("@write pkg/new.py\ndef f():\n    return 1\n", false).state == ParsedTurn::State::incomplete);
  const ToolCall write = test::parsed_call("@write pkg/new.py\ndef f():\n    return 1\n@end\n");
  CHECK(write.kind == ToolKind::write);
  CHECK(write.body == "def f():\n    return 1\n");
  const ToolCall replace = test::parsed_call("@replace pkg/a.py 4-3\n    x = 1\n@end\n");
  CHECK((replace.kind == ToolKind::replace && replace.first == 4 && replace.last == 3 && replace.body == "    x = 1\n"));
  // A Python decorator inside a body is body text, not a call.
  CHECK(test::parsed_call("@write pkg/d.py\n@staticmethod\n@end\n").body == "@staticmethod\n");
  CHECK(test::parsed_call("@submit\n").kind == ToolKind::submit);
  CHECK(test::parsed_call("@run\n").kind == ToolKind::run);
}

TEST_CASE("a turn with no runnable call ends as an observation that says why", "[envs][workspace]") {
  const auto error_of = [](const std::string& text, bool ended) {
    const ParsedTurn t = parse_turn(text, ended);
    CHECK(t.state == ParsedTurn::State::bad);
    return t.error;
  };
  CHECK_THAT(error_of("@open pkg/a.py\n", false), Catch::Contains("no tool '@open'"));
  CHECK_THAT(error_of("@read\n", false), Catch::Contains("@read PATH"));
  CHECK_THAT(error_of("@read a.py 9-3\n", false), Catch::Contains("FIRST-LAST"));
  CHECK_THAT(error_of("@read a.py x-y\n", false), Catch::Contains("FIRST-LAST"));
  CHECK_THAT(error_of("@list everything\n", false), Catch::Contains("takes nothing"));
  CHECK_THAT(error_of("@end\n", false), Catch::Contains("none open"));
  CHECK_THAT(error_of("@write a.py\nhalf a file", true), Catch::Contains("@end"));
  CHECK_THAT(error_of("I think the answer is 4.", true), Catch::Contains("no tool call"));
  CHECK(parse_turn("I think", false).state == ParsedTurn::State::incomplete);
  const ToolResult r = bad_turn(parse_turn("@open x\n", false));
  CHECK(r.bad_call);
  CHECK(r.observation.rfind("error: ", 0) == 0);
  CHECK_FALSE(r.submitted);
}

TEST_CASE("workspace paths stay inside the project and its limits hold", "[envs][workspace]") {
  for (const char* bad : {"", "/etc/passwd", "../x", "pkg/../../x", "a//b", "a/", ".git/config", "pkg/.hidden",
                          "a b", "a/b/c/d/e", "x\\y", "hidden\x01"})
    CHECK_FALSE(bad_workspace_path(bad).empty());
  for (const char* good : {"pkg/ledger.py", "README.md", "tests/test_a.py", "a/b/c/d"}) CHECK(bad_workspace_path(good).empty());

  WorkspaceLimits limits;
  limits.max_files = 3;
  limits.max_file_bytes = 10;
  limits.max_total_bytes = 15;
  WorkspaceFiles files({{"a.py", "12345"}, {"pkg/b.py", "123"}}, limits);
  CHECK(files.write("c.py", "1234567").ok());  // 3 files, 15 bytes
  CHECK_THAT(files.write("d.py", "").error().message, Catch::Contains("at most 3 files"));
  CHECK_THAT(files.write("a.py", "12345678901").error().message, Catch::Contains("at most 10 bytes"));
  CHECK_THAT(files.write("a.py", "123456").error().message, Catch::Contains("in all"));
  CHECK_THAT(files.write("pkg", "x").error().message, Catch::Contains("is a folder"));
  CHECK_THAT(files.write("a.py/x", "x").error().message, Catch::Contains("not a folder"));
  CHECK(*files.find("a.py") == "12345");  // refused writes changed nothing
  CHECK(files.total_bytes() == 15);
  CHECK(files.write("a.py", "1234").ok());
  const auto changed = files.changed_from({{"a.py", "12345"}, {"pkg/b.py", "123"}});
  REQUIRE(changed.size() == 2);
  CHECK((changed[0].path == "a.py" && changed[1].path == "c.py"));
}

TEST_CASE("changed files cross as a payload that refuses anything else", "[envs][workspace]") {
  const std::vector<WorkspaceFile> files{{"pkg/a.py", "def f():\n    return 1\n"}, {"tests/empty.py", ""}};
  auto back = decode_changes(encode_changes(files));
  REQUIRE(back.ok());
  REQUIRE(back->size() == 2);
  CHECK(((*back)[0].text == files[0].text && (*back)[1].path == "tests/empty.py"));
  CHECK(decode_changes("").ok());
  for (const char* bad : {"pkg/a.py", "pkg/a.py\n", "pkg/a.py\n5\nabc", "pkg/a.py\nx\nabc", "../a.py\n1\nx",
                          "a.py\n1\nxa.py\n1\ny", "a.py\n1\nxa.py\n1\nx", "a.py\n99999999\n"})
    CHECK_FALSE(decode_changes(bad).ok());
}

TEST_CASE("tools read, replace and write the episode's own copy", "[envs][workspace]") {
  const WorkspaceTask task = make_workspace_task(TaskSplit::train, 11, 1);
  WorkspaceFiles files(task.workspace);
  const Sandbox box = test::open_sandbox();
  const ToolResult list = run_tool(test::parsed_call("@list\n"), files, box);
  CHECK_THAT(list.observation, Catch::Contains("run_tests.py ("));
  CHECK_THAT(list.observation, !Catch::Contains("hidden"));
  const std::string module = task.workspace.front().path;
  const ToolResult read = run_tool(test::parsed_call("@read " + module + " 2-3\n"), files, box);
  CHECK_THAT(read.observation, Catch::StartsWith(module + " lines 2-3 of "));
  CHECK_THAT(read.observation, Catch::Contains("   2| "));
  CHECK_THAT(read.observation, !Catch::Contains("   4| "));
  ToolBudget small;
  small.read_lines = 2;
  CHECK_THAT(run_tool(test::parsed_call("@read " + module + "\n"), files, box, small).observation, Catch::Contains("lines 1-2 of"));
  CHECK(run_tool(test::parsed_call("@read nothing.py\n"), files, box).bad_call);
  // A path cut short: the error names the files beside it, to copy the right one from.
  const std::string cut = module.substr(0, module.size() - 4) + ".py";
  const ToolResult missing = run_tool(test::parsed_call("@read " + cut + "\n"), files, box);
  CHECK(missing.bad_call);
  CHECK_THAT(missing.observation, Catch::StartsWith("error: no file " + cut + " (files beside it: ") &&
                                      Catch::Contains(module) && !Catch::Contains("run_tests.py"));
  CHECK_THAT(run_tool(test::parsed_call("@replace " + cut + " 1-1\nx\n@end\n"), files, box).observation,
             Catch::Contains(module) && Catch::EndsWith("; @write makes one)"));
  CHECK(run_tool(test::parsed_call("@read nowhere/x.py\n"), files, box).observation ==
        "error: no file nowhere/x.py (@list shows the files)");
  CHECK(run_tool(test::parsed_call("@read ../../etc/passwd\n"), files, box).bad_call);
  CHECK(run_tool(test::parsed_call("@read " + module + " 900-901\n"), files, box).bad_call);

  REQUIRE(run_tool(test::parsed_call("@write notes/plan.txt\nfirst\nsecond\n@end\n"), files, box).observation == "wrote notes/plan.txt (2 lines)\n");
  CHECK(run_tool(test::parsed_call("@replace notes/plan.txt 2-2\nSECOND\nthird\n@end\n"), files, box).observation ==
        "notes/plan.txt: lines 2-2 replaced by 2 lines; it has 3 lines now\n");
  CHECK(*files.find("notes/plan.txt") == "first\nSECOND\nthird\n");
  run_tool(test::parsed_call("@replace notes/plan.txt 1-0\nzeroth\n@end\n"), files, box);  // inserts
  CHECK(*files.find("notes/plan.txt") == "zeroth\nfirst\nSECOND\nthird\n");
  run_tool(test::parsed_call("@replace notes/plan.txt 2-4\n@end\n"), files, box);  // deletes
  CHECK(*files.find("notes/plan.txt") == "zeroth\n");
  CHECK(run_tool(test::parsed_call("@replace notes/plan.txt 3-3\nx\n@end\n"), files, box).bad_call);
  // The task's own files are untouched by the episode's edits.
  CHECK(WorkspaceFiles(task.workspace).find("notes/plan.txt") == nullptr);
  CHECK(run_tool(test::parsed_call("@submit\n"), files, box).submitted);
}

TEST_CASE("output past the budget is cut, keeping the head and the last line", "[envs][workspace]") {
  std::string out;
  for (int i = 0; i < 200; ++i) out += "FAILED tests/test_a.py::test_" + std::to_string(i) + ": AssertionError\n";
  out += "3 passed, 200 failed\n";
  const std::string cut = cut_output(out, 400);
  CHECK(cut.size() <= 400);
  CHECK_THAT(cut, Catch::StartsWith("FAILED tests/test_a.py::test_0: AssertionError\n"));
  CHECK_THAT(cut, Catch::EndsWith("bytes cut)\n3 passed, 200 failed\n"));
  CHECK(cut_output("short\n", 400) == "short\n");
}

TEST_CASE("an expert episode restores the removed bodies, sees the tests pass and is scored 1", "[envs][workspace][sandbox]") {
  const WorkspaceTask task = make_workspace_task(TaskSplit::held_out, 5, 2);
  WorkspaceFiles files(task.workspace);
  const Sandbox box = test::open_sandbox();
  const ToolResult before = run_tool(test::parsed_call("@run\n"), files, box);
  CHECK(before.failure == InfraFailure::none);
  CHECK_THAT(before.observation, Catch::Contains("NotImplementedError"));
  CHECK_THAT(before.observation, Catch::Contains(" failed"));
  for (const auto& fix : expert_turns(task)) {
    if (fix.rfind("@replace ", 0) != 0) continue;  // the expert's fixes alone
    const ToolResult r = run_tool(test::parsed_call(fix), files, box);
    INFO(fix << r.observation);
    CHECK_FALSE(r.bad_call);
  }
  const ToolResult after = run_tool(test::parsed_call("@run\n"), files, box);
  CHECK_THAT(after.observation, Catch::EndsWith(std::to_string(task.visible_count) + " passed, 0 failed\n"));
  CHECK(run_tool(test::parsed_call("@submit\n"), files, box).submitted);

  // The reward pool's view: the task id and the changed files, nothing else.
  auto scorer = WorkspaceScorer::open();
  REQUIRE(scorer.ok());
  RewardRequestData request;
  request.request_id = 9;
  request.task = task.id;
  request.payload = encode_changes(files.changed_from(task.workspace));
  const RewardResultData result = (*scorer)->score(request);
  INFO(result.reason);
  CHECK(result.ok);
  CHECK(result.score == 1.0f);
  CHECK(result.request_id == 9);
  CHECK_THAT(result.reason, Catch::StartsWith("passed all "));

  request.task = "held_out:5";
  CHECK((*scorer)->score(request).failure == InfraFailure::bad_request);
  request.task = task.id;
  request.payload = "pkg/a.py\n999\nshort";
  CHECK((*scorer)->score(request).failure == InfraFailure::bad_request);
}
