// @replace PATH NAME: an edit that names the function whose body it
// replaces, so an agent copies a name it has read instead of counting
// lines. Where the body lies (after the def line and the docstring, up to
// the block's end), what stays (the docstring, the code around it), and
// every way the name can fail to pick one body.
#include <catch2/catch.hpp>

#include "envs/workspace/agent_tools.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "tests/envs/sandbox_fixture.hpp"
#include "tests/envs/tool_call_fixture.hpp"

using namespace rlx;

namespace {

const char* kModule =
    "\"\"\"The ledger module.\"\"\"\n"    // 1
    "\n"                                   // 2
    "\n"                                   // 3
    "def total(xs):\n"                     // 4
    "    \"\"\"Returns the sum of xs.\n"   // 5
    "\n"                                   // 6
    "    >>> total([1, 2])\n"              // 7
    "    3\n"                              // 8
    "    \"\"\"\n"                         // 9
    "    raise NotImplementedError(\"restore this function\")\n"  // 10
    "\n"                                   // 11
    "\n"                                   // 12
    "def scaled(xs,\n"                     // 13
    "           k):\n"                     // 14
    "    '''One line.'''\n"                // 15
    "    ys = [x * k for x in xs]\n"       // 16
    "\n"                                   // 17
    "    return ys\n"                      // 18
    "\n"                                   // 19
    "class Book:\n"                        // 20
    "    def entry(self):\n"               // 21
    "        return 1\n"                   // 22
    "\n"                                   // 23
    "    def bare(self):\n"                // 24
    "        \"\"\"Nothing yet.\"\"\"\n"   // 25
    "\n"                                   // 26
    "def one(x): return x\n"               // 27
    "def twice(): pass\n"                  // 28
    "def twice(): pass\n";                 // 29

}  // namespace

TEST_CASE("a replace names a function's body by the function's name", "[envs][workspace]") {
  const ToolCall call = test::parsed_call("@replace pkg/ledger.py total\n    return sum(xs)\n@end\n");
  CHECK(call.kind == ToolKind::replace);
  CHECK(call.path == "pkg/ledger.py");
  CHECK(call.function == "total");
  CHECK((call.first == 0 && call.last == 0));
  CHECK(test::parsed_call("@replace pkg/a.py 4-5\nx\n@end\n").function.empty());
  for (const char* bad : {"@replace pkg/a.py 4x\n", "@replace pkg/a.py total()\n", "@replace pkg/a.py\n",
                          "@replace pkg/a.py 9-3\n", "@replace pkg/a.py a b\n"}) {
    const ParsedTurn t = parse_turn(bad, false);
    INFO(bad);
    CHECK(t.state == ParsedTurn::State::bad);
    CHECK_THAT(t.error, Catch::Contains("function's name") || Catch::Contains("@replace PATH NAME"));
  }
}

TEST_CASE("a function's body lies after its signature and docstring, to its block's last line", "[envs][workspace]") {
  const auto lines = split_lines(kModule);
  const auto at = [&](const char* name) {
    const BodyLines b = function_body(lines, name);
    INFO(name << ": " << b.why);
    CHECK(b.why.empty());
    return std::pair<int, int>{b.first, b.last};
  };
  CHECK(at("total") == std::pair<int, int>{10, 10});   // after a docstring of 5 lines
  CHECK(at("scaled") == std::pair<int, int>{16, 18});  // a signature over two lines; a blank line inside the body
  CHECK(at("entry") == std::pair<int, int>{22, 22});   // a method, indented
  CHECK(at("bare") == std::pair<int, int>{26, 25});    // a docstring alone: an insertion after it
  CHECK_THAT(function_body(lines, "missing").why,
             Catch::Contains("no function missing") && Catch::Contains("total, scaled, entry, bare, one, twice"));
  CHECK_THAT(function_body(lines, "twice").why, Catch::Contains("more than once (lines 28 and 29)"));
  CHECK_THAT(function_body(lines, "one").why, Catch::Contains("replace lines instead"));
  CHECK_THAT(function_body(lines, "tot").why, Catch::Contains("no function tot"));  // a prefix names nothing
  CHECK_THAT(function_body({}, "total").why, Catch::Contains("defines none"));
  // A docstring whose lines sit at column 0 is still the docstring, not the block's end.
  const std::vector<std::string> flush{"def f(x):", "    \"\"\"Doc.", "", "flush left", "\"\"\"", "    y = x", "    return y",
                                       "", "def g():", "    pass"};
  CHECK(function_body(flush, "f").first == 6);
  CHECK(function_body(flush, "f").last == 7);
  // So is a string the body opens over several lines, one at column 0 (as an agent may write).
  const std::vector<std::string> text{"def f(x):", "    \"\"\"Doc.\"\"\"", "    y = '''a", "flush left", "''' + x",
                                      "    return y", "", "def g():", "    s = \"\"\"one\"\"\" + '''two'''",
                                      "    return s", "x = 1"};
  CHECK(function_body(text, "f").first == 3);
  CHECK(function_body(text, "f").last == 6);
  CHECK(function_body(text, "g").first == 9);  // strings opened and closed on one line change nothing
  CHECK(function_body(text, "g").last == 10);
  // No statement at all: the lines go right after the signature.
  CHECK(function_body({"def f():", "def g():", "    pass"}, "f").first == 2);
  CHECK(function_body({"def f():", "def g():", "    pass"}, "f").last == 1);
}

TEST_CASE("a replace by name keeps the docstring and everything around the body", "[envs][workspace]") {
  const std::vector<WorkspaceFile> project{{"pkg/ledger.py", kModule}};
  WorkspaceFiles files(project);
  const Sandbox box = test::open_sandbox();
  const ToolResult r = run_tool(test::parsed_call("@replace pkg/ledger.py total\n    return sum(xs)\n@end\n"), files, box);
  CHECK(r.observation == "pkg/ledger.py: the body of total (lines 10-10) replaced by 1 lines; it has 29 lines now\n");
  std::string want = kModule;
  want.replace(want.find("    raise NotImplementedError(\"restore this function\")\n"),
               std::string("    raise NotImplementedError(\"restore this function\")\n").size(), "    return sum(xs)\n");
  CHECK(*files.find("pkg/ledger.py") == want);
  // A body of two lines for one of three; then an insertion after a lone docstring.
  run_tool(test::parsed_call("@replace pkg/ledger.py scaled\n    return [x * k\n            for x in xs]\n@end\n"), files, box);
  run_tool(test::parsed_call("@replace pkg/ledger.py bare\n        return 0\n@end\n"), files, box);
  const auto lines = split_lines(*files.find("pkg/ledger.py"));
  REQUIRE(lines.size() == 29);
  CHECK(lines[14] == "    '''One line.'''");
  CHECK(lines[15] == "    return [x * k");
  CHECK(lines[16] == "            for x in xs]");
  CHECK(lines[17].empty());
  CHECK(lines[18] == "class Book:");
  CHECK(lines[23] == "        \"\"\"Nothing yet.\"\"\"");
  CHECK(lines[24] == "        return 0");
  // Refused, and the file as it was.
  const std::string before = *files.find("pkg/ledger.py");
  for (const char* bad : {"@replace pkg/ledger.py missing\nx\n@end\n", "@replace pkg/ledger.py twice\nx\n@end\n",
                          "@replace pkg/none.py total\nx\n@end\n"}) {
    const ToolResult no = run_tool(test::parsed_call(bad), files, box);
    INFO(bad << no.observation);
    CHECK(no.bad_call);
    CHECK_THAT(no.observation, Catch::StartsWith("error: "));
  }
  CHECK(*files.find("pkg/ledger.py") == before);
}

TEST_CASE("the expert restores each hole by its function's name", "[envs][workspace]") {
  for (int difficulty = 1; difficulty <= 3; ++difficulty) {
    const WorkspaceTask task = make_workspace_task(TaskSplit::train, 40 + static_cast<std::uint64_t>(difficulty), difficulty);
    int named = 0;
    for (const auto& turn : expert_turns(task)) {
      if (turn.rfind("@replace ", 0) != 0) continue;
      const ToolCall call = test::parsed_call(turn);
      CHECK_FALSE(call.function.empty());
      ++named;
    }
    CHECK(named == static_cast<int>(task.holes.size()));
  }
}
