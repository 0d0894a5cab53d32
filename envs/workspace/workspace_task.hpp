// Workspace tasks (envs/workspace): a small generated Python project
// (modules of functions with docstrings that call each other, and a test
// suite) with some function bodies removed; the agent must restore them.
// The workspace holds the project with its holes and a visible subset of
// the tests; the hidden suite (every test, plus edge cases) decides the
// reward and never enters the workspace.
//
// Held out by construction, not by seed: training and held-out tasks come
// from disjoint project templates, disjoint vocabularies of constants,
// letters and names (training names are made up syllable by syllable for
// each project, held-out ones are real words), and disjoint sets of body shapes (a shape belongs to
// one split by its hash), so no held-out function is a training function
// under another seed (tests/envs/workspace_task_test.cpp proves it on
// samples). CAF-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "envs/workspace/python_program.hpp"

namespace rlx {

enum class TaskSplit : std::uint8_t { train, held_out };
const char* task_split_name(TaskSplit s);

struct WorkspaceFile {
  std::string path;  // relative: "pkg/ledger.py", "tests/test_ledger.py"
  std::string text;
};

// One hidden test as data: the scorer calls module.function(*args) in the
// sandbox and compares the answer with `expected` outside it.
struct WorkspaceCase {
  std::string module, function;
  std::vector<PyValue> args;
  PyValue expected;
  // It fails in the workspace as given: a test of a removed body, or of a
  // function that calls one (directly or further down).
  bool broken = false;
};

struct WorkspaceTask {
  std::string id;                          // "train:SEED:DIFFICULTY": all it takes to rebuild the task
  TaskSplit split = TaskSplit::train;
  int template_index = 0;
  int difficulty = 1;                      // 1-3: bodies removed; 0: one, of one operation
  std::vector<WorkspaceFile> workspace;    // the project with holes, the visible tests, run_tests.py, README.md
  std::vector<WorkspaceFile> hidden_tests; // hidden/test_*.py: every test and edge cases
  std::vector<WorkspaceCase> hidden_cases; // the same tests as data (what the scorer runs)
  std::vector<WorkspaceFile> solution;     // the modules whole
  std::vector<std::string> holes;          // "module.function" of each removed body
  std::vector<PyFunction> functions;       // the project's functions, in definition order
  std::size_t visible_count = 0, hidden_count = 0;  // tests
};

// Project templates: training draws from the first kTrainTemplates, held-out
// tasks from the rest.
constexpr int kTemplates = 8;
constexpr int kTrainTemplates = 6;

// The module file a hole ("module.function") lies in ("pkg/module.py"), and its function.
std::string hole_path(const std::string& hole);
std::string hole_function(const std::string& hole);

// Task `seed` of `split` with `difficulty` (1-3) holes; difficulty 0 has
// one hole, the project's first function, whose body is one operation over
// its parameters (`sorted(xs)`, `n // 4`): the operation occurs inside
// training bodies, the body alone is a shape of its split as every body is.
WorkspaceTask make_workspace_task(TaskSplit split, std::uint64_t seed, int difficulty);

// `task` with one hole, at function `index` (its body removed, every
// other body whole, the README naming it): a drill for the supervised
// start, which may make any function of a training project a hole. Not a
// task to score (no hidden tests; its id does not rebuild it).
WorkspaceTask single_hole_task(const WorkspaceTask& task, std::size_t index);

// The README of a workspace with these holes ("module.function").
std::string workspace_readme(const std::vector<std::string>& holes);

// The task an id names ("train:12:2", as WorkspaceTask::id writes it), or
// why the id names none.
Result<WorkspaceTask> workspace_task(const std::string& id);

// A function's source with its names taken out (parameters a0, a1, ...;
// each callee named by a hash of its own normalised source): equal for two
// functions that compute the same way.
std::string normalised_source(const PyFunction& f, const std::vector<PyFunction>& project);

// Which split a body shape belongs to (a stable hash of expr_shape).
TaskSplit shape_split(const std::string& shape);

// The test runner both the workspace and the scorer use: runs every
// test_* function of <folder>/test_*.py, prints "N passed, M failed".
const std::string& test_runner_source();

}  // namespace rlx
