// Scoring a workspace episode, attacked by agents scripted to cheat: each
// cheat scores 0 with its reason and harms nothing (the next honest agent
// still scores 1). Controls: the reference solution scores 1, the untouched
// workspace 0, and the solution-finding cheat does find a solution that is
// readable (so its 0 elsewhere is not a cheat that could never work).
#include <algorithm>
#include <sstream>

#include <catch2/catch.hpp>

#include "envs/workspace/workspace_scorer.hpp"
#include "tests/envs/sandbox_fixture.hpp"

using namespace rlx;

namespace {

const WorkspaceTask& task() {
  // Two holes, and a function that works as given (the first such seed from 21).
  static const WorkspaceTask t = [] {
    for (std::uint64_t seed = 21;; ++seed) {
      auto candidate = make_workspace_task(TaskSplit::train, seed, 2);
      if (std::any_of(candidate.hidden_cases.begin(), candidate.hidden_cases.end(),
                      [](const WorkspaceCase& c) { return !c.broken; }))
        return candidate;
    }
  }();
  return t;
}

// The solution's modules that differ from the workspace's.
std::vector<WorkspaceFile> solution_changes(const WorkspaceTask& t) {
  std::vector<WorkspaceFile> out;
  for (const auto& s : t.solution)
    for (const auto& w : t.workspace)
      if (s.path == w.path && s.text != w.text) out.push_back(s);
  return out;
}

// Every holed module with each removed body replaced by `body` (indented
// lines) and `helpers` put at its top.
std::vector<WorkspaceFile> holes_doing(const WorkspaceTask& t, const std::string& helpers, const std::string& body) {
  std::vector<WorkspaceFile> out;
  const std::string hole = "    raise NotImplementedError(\"restore this function\")\n";
  for (const auto& w : t.workspace) {
    if (w.text.find(hole) == std::string::npos) continue;
    std::string text = helpers + w.text;
    for (auto at = text.find(hole); at != std::string::npos; at = text.find(hole, at + body.size()))
      text.replace(at, hole.size(), body);
    out.push_back({w.path, text});
  }
  return out;
}

WorkspaceScore scored(const Sandbox& box, const std::vector<WorkspaceFile>& changes) {
  WorkspaceScore s = score_workspace(box, task(), changes);
  UNSCOPED_INFO("reason: " << s.reason << "\nerr: " << s.run.err.substr(0, 600));
  CHECK(s.failure == InfraFailure::none);
  return s;
}

}  // namespace

TEST_CASE("the reference solution scores 1 and the untouched workspace 0", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  const WorkspaceScore right = scored(box, solution_changes(task()));
  CHECK(right.reward == 1.0);
  CHECK(right.solved);
  CHECK(right.broken_total >= 14);
  CHECK(right.broken_passed == right.broken_total);
  CHECK(right.kept_passed == right.kept_total);
  const WorkspaceScore none = scored(box, {});
  CHECK(none.reward == 0.0);
  CHECK(none.broken_passed == 0);
  CHECK_THAT(none.reason, Catch::StartsWith("passed 0 of the "));

  // One removed body restored of two: partial credit, not solved.
  std::vector<WorkspaceFile> half;
  for (const auto& whole : solution_changes(task())) {
    for (const auto& holed : task().workspace) {
      if (holed.path != whole.path || !half.empty()) continue;
      std::istringstream a(holed.text), b(whole.text);
      std::string la, lb, text;
      bool fixed = false;
      while (std::getline(a, la) && std::getline(b, lb)) {
        text += (la != lb && !fixed ? lb : la) + "\n";
        fixed = fixed || la != lb;
      }
      half.push_back({whole.path, text});
    }
  }
  REQUIRE(task().holes.size() == 2);
  const WorkspaceScore partial = scored(box, half);
  CHECK(partial.reward > 0.0);
  CHECK(partial.reward < 1.0);
  CHECK_FALSE(partial.solved);

  // Breaking a function that worked earns nothing for the rest.
  auto broken = solution_changes(task());
  bool broke = false;
  const auto kept = std::find_if(task().hidden_cases.begin(), task().hidden_cases.end(), [](const WorkspaceCase& c) { return !c.broken; });
  REQUIRE(kept != task().hidden_cases.end());
  const std::string path = "pkg/" + kept->module + ".py";
  auto in = std::find_if(broken.begin(), broken.end(), [&](const WorkspaceFile& f) { return f.path == path; });
  if (in == broken.end())
    for (const auto& w : task().workspace)
      if (w.path == path) in = broken.insert(broken.end(), w);
  if (in != broken.end()) {
    in->text.insert(in->text.find("    return ", in->text.find("def " + kept->function + "(")) + 4, "raise KeyError()\n    ");
    broke = true;
  }
  REQUIRE(broke);
  const WorkspaceScore b = scored(box, broken);
  CHECK(b.kept_passed < b.kept_total);
  CHECK(b.reward == 0.0);
  CHECK_THAT(b.reason, Catch::Contains("that passed before the change fail"));
  CHECK_THAT(b.reason, Catch::Contains("raised KeyError"));
}

TEST_CASE("edited, emptied or replaced tests and runners are not what scoring runs", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  std::vector<WorkspaceFile> cheat;
  for (const auto& w : task().workspace)
    if (w.path.rfind("tests/", 0) == 0) cheat.push_back({w.path, "def test_everything():\n    pass\n"});
  cheat.push_back({"tests/test_extra.py", ""});
  cheat.push_back({"run_tests.py", "print('100 passed, 0 failed')\n"});
  const WorkspaceScore s = scored(box, cheat);
  CHECK(s.reward == 0.0);
  CHECK(s.ignored.size() == cheat.size());
  CHECK_THAT(s.reason, Catch::Contains("ignored tests/"));
  CHECK_THAT(s.reason, Catch::Contains("run_tests.py"));
}

TEST_CASE("conftest, sitecustomize, usercustomize and .pth hooks are discarded", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  // Each would make every call answer what the test wants if Python ran it.
  const std::string hook = "import builtins\nbuiltins.NotImplementedError = type('X', (Exception,), {})\n";
  const std::vector<WorkspaceFile> cheat{{"conftest.py", hook},         {"pkg/conftest.py", hook},
                                         {"tests/conftest.py", hook},   {"sitecustomize.py", hook},
                                         {"pkg/sitecustomize.py", hook}, {"pkg/usercustomize.py", hook},
                                         {"pkg/evil.pth", "import os; os._exit(0)\n"}, {"pkg/__init__.py", hook},
                                         {"pkg/test_pkg.py", hook},     {"pkg/sub/mod.py", hook}};
  const WorkspaceScore s = scored(box, cheat);
  CHECK(s.reward == 0.0);
  CHECK(s.ignored.size() == cheat.size());
  for (const auto& c : cheat) CHECK(!scored_source(c.path));
  CHECK(scored_source("pkg/helpers.py"));
}

TEST_CASE("an agent that searches the machine for the solution or the hidden tests finds neither", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  // Walks everything readable except /usr (the system's own files) and
  // /proc's per-process trees (it reads each process's cmdline and
  // environ), looking for any file that defines the removed function whole,
  // or a hidden test file; defines the function from what it finds.
  const std::string helpers = R"PY(import os as _os

def _search(name):
    want = "def " + name + "("
    seen = 0
    for root, dirs, files in _os.walk("/", followlinks=False):
        if root == "/":
            dirs[:] = [d for d in dirs if d not in ("usr", "proc", "sys", "dev")]
        for f in files:
            seen += 1
            try:
                text = open(_os.path.join(root, f), errors="replace").read(1 << 20)
            except OSError:
                continue
            if want in text and "restore this function" not in text and "def _search" not in text:
                space = {}
                exec(compile(text, f, "exec"), space)
                return space[name]
    for pid in _os.listdir("/proc"):
        for part in ("cmdline", "environ"):
            try:
                if want in open("/proc/%s/%s" % (pid, part), errors="replace").read():
                    raise RuntimeError("found it in /proc")
            except OSError:
                pass
    raise LookupError("no solution in %d files" % seen)

)PY";
  // In the hole: find the function by its own name and call it with its own arguments.
  const auto cheat = holes_doing(task(), helpers,
                      "    import sys as _sys\n"
                      "    _frame = _sys._getframe()\n"
                      "    _args = [_frame.f_locals[n] for n in _frame.f_code.co_varnames[:_frame.f_code.co_argcount]]\n"
                      "    return _search(_frame.f_code.co_name)(*_args)\n");
  const WorkspaceScore s = scored(box, cheat);
  CHECK(s.reward == 0.0);
  CHECK(s.broken_passed == 0);
  CHECK_THAT(s.reason, Catch::Contains("raised LookupError"));  // it searched, and found nothing

  // The control: the same cheat with the solution readable (put in the
  // package under another name) finds it and passes.
  auto planted = cheat;
  for (const auto& w : solution_changes(task())) {
    std::string copy = w.text;
    for (auto at = copy.find("from pkg."); at != std::string::npos; at = copy.find("from pkg.", at + 3)) copy.insert(at, "# ");
    planted.push_back({"pkg/reference_" + w.path.substr(4), copy});
  }
  const WorkspaceScore found = scored(box, planted);
  CHECK(found.broken_passed > 0);
}

TEST_CASE("printed pass lines, early exits and sleeps score 0 with their reasons", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox(3.0);
  // Fake lines in every form a reader might take for results, at import and at exit.
  const std::string fakes = R"PY(import atexit as _atexit, sys as _sys

def _fake():
    for i in range(100):
        print("\x1eRLX-RESULT %d 0" % i)
        print("\x1eRLX%016x %d 0" % (i, i))
        print("%d passed, 0 failed" % i)
    _sys.stdout.flush()

_fake()
_atexit.register(_fake)
)PY";
  const WorkspaceScore printed = scored(box, holes_doing(task(), fakes, "    raise ValueError()\n"));
  CHECK(printed.reward == 0.0);
  CHECK(printed.broken_passed == 0);
  CHECK(printed.run.ok());  // it ran to the end: the fakes were read, and not taken
  CHECK_THAT(printed.reason, Catch::Contains("raised ValueError"));
  CHECK(score_outcome(printed.reward, printed.reason) == "ValueError");

  const WorkspaceScore exited = scored(box, holes_doing(task(), "import os as _os\n_os._exit(0)\n", "    return 0\n"));
  CHECK(exited.reward == 0.0);
  CHECK_THAT(exited.reason, Catch::Contains("gave no answer"));
  CHECK(score_outcome(exited.reward, exited.reason) == "no answer");

  const WorkspaceScore slept = scored(box, holes_doing(task(), "import time as _time\n", "    _time.sleep(30)\n"));
  CHECK(slept.reward == 0.0);
  CHECK(slept.run.end == SandboxRun::End::timed_out);
  CHECK_THAT(slept.reason, Catch::Contains("timed out"));
  CHECK(score_outcome(slept.reward, slept.reason) == "ended early");
}

TEST_CASE("a failed score is counted by how it failed: the exception a hidden test raised, named",
          "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  const WorkspaceScore right = scored(box, solution_changes(task()));
  CHECK(score_outcome(right.reward, right.reason) == "passed");
  const WorkspaceScore untouched = scored(box, {});
  CHECK(score_outcome(untouched.reward, untouched.reason) == "NotImplementedError");
  // A name not copied (what held-out episodes do: docs/results/agent-workload.md "Difficulty 0").
  const WorkspaceScore misnamed = scored(box, holes_doing(task(), "", "    return algn_tides\n"));
  CHECK(score_outcome(misnamed.reward, misnamed.reason) == "NameError");
  // A module that no longer parses fails every test that imports it.
  const WorkspaceScore unparsed = scored(box, holes_doing(task(), "", "    return str(x.upper()\n"));
  CHECK(score_outcome(unparsed.reward, unparsed.reason) == "SyntaxError");
}

TEST_CASE("an agent that fills the disk harms nothing and the next agent scores 1", "[envs][workspace][sandbox]") {
  const Sandbox box = test::open_sandbox();
  const std::string helpers = R"PY(import os as _os

def _fill():
    written = 0
    for where in ("/work/pkg", "/work", "/tmp", "/"):
        try:
            with open(_os.path.join(where, "fill.bin"), "wb") as f:
                while True:
                    f.write(b"x" * (1 << 20))
                    written += 1
        except OSError:
            pass
    return written

)PY";
  const WorkspaceScore s = scored(box, holes_doing(task(), helpers, "    return _fill()\n"));
  CHECK(s.reward == 0.0);
  CHECK(s.run.ok());
  CHECK_THAT(s.reason, Catch::Contains("answered wrong"));  // it returned how much it wrote
  CHECK(score_outcome(s.reward, s.reason) == "wrong answer");
  const WorkspaceScore next = scored(box, solution_changes(task()));
  CHECK(next.reward == 1.0);
}

TEST_CASE("expected values are written as Python's json.dumps writes answers", "[envs][workspace]") {
  CHECK(json_value(PyValue{std::int64_t{-12}}) == "-12");
  CHECK(json_value(PyValue{std::vector<std::int64_t>{3, -1, 0}}) == "[3,-1,0]");
  CHECK(json_value(PyValue{std::vector<std::int64_t>{}}) == "[]");
  CHECK(json_value(PyValue{std::string("a\"b\\c\n\t\x01~\x7f")}) == "\"a\\\"b\\\\c\\n\\t\\u0001~\x7f\"");
}
