// Workspace tasks (envs/workspace): generated Python projects whose
// solution passes its tests under python3 (so the C++ evaluator agrees with
// Python), whose holes fail them, and whose held-out split is held out by
// construction.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "envs/workspace/workspace_task.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace rlx::test;
namespace fs = std::filesystem;

namespace {

void write_files(const fs::path& root, const std::vector<WorkspaceFile>& files) {
  for (const auto& f : files) {
    const fs::path p = root / f.path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << f.text;
  }
}

// Runs `python3 run_tests.py FOLDER` in `root`: its exit code and output.
std::pair<int, std::string> run_tests(const fs::path& root, const std::string& folder) {
  const std::string cmd = "cd '" + root.string() + "' && python3 -B run_tests.py " + folder + " 2>&1";
  auto run = test::run_command(cmd);
  return {run.status, std::move(run.out)};
}

std::string files_text(const std::vector<WorkspaceFile>& files) {
  std::string s;
  for (const auto& f : files) s += f.path + "\n" + f.text + "\n";
  return s;
}

}  // namespace

TEST_CASE("a workspace task is rebuilt the same from its split, seed and difficulty", "[envs][workspace]") {
  const auto a = make_workspace_task(TaskSplit::train, 42, 2);
  const auto b = make_workspace_task(TaskSplit::train, 42, 2);
  CHECK(a.id == "train:42:2");
  CHECK(files_text(a.workspace) == files_text(b.workspace));
  CHECK(files_text(a.hidden_tests) == files_text(b.hidden_tests));
  CHECK(files_text(a.workspace) != files_text(make_workspace_task(TaskSplit::train, 43, 2).workspace));
  CHECK(a.holes.size() == 2);
  CHECK(a.hidden_count > a.visible_count);
}

TEST_CASE("a workspace task id rebuilds its task, and an id that is not one is refused", "[envs][workspace]") {
  for (const char* id : {"train:42:2", "held_out:7:0", "train:1844674407370955161:3"}) {
    const auto task = workspace_task(id);
    REQUIRE(task);
    CHECK(task->id == id);
  }
  CHECK(files_text(workspace_task("held_out:7:0")->workspace) == files_text(make_workspace_task(TaskSplit::held_out, 7, 0).workspace));
  for (const std::string& id : std::vector<std::string>{"train:1:4", "test:1:1", "train:x:1", "train:1:", "train::1", "train:1", "train:1:1:1",
                               "train:-1:1", "train:1:01", "train:" + std::string(70, '1') + ":1"}) {
    INFO(id);
    const auto task = workspace_task(id);
    REQUIRE_FALSE(task);
    CHECK(task.error().message.find("not a workspace task id") != std::string::npos);
  }
}

TEST_CASE("a workspace task's solution passes every test under python3 and its holes fail them",
          "[envs][workspace][code]") {
  TempDir t("rlx-workspace");
  int tasks = 0;
  for (const TaskSplit split : {TaskSplit::train, TaskSplit::held_out}) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {  // python3 starts in ~0.35 s here: 15 runs a split
      const auto task = make_workspace_task(split, seed, static_cast<int>(seed % 4));  // difficulties 1, 2, 3, 0, 1
      INFO(task.id);
      const fs::path whole = t.path / (task.id + "-whole"), holed = t.path / (task.id + "-holed");
      // The solution with every test: what scoring a perfect agent does.
      write_files(whole, task.workspace);
      write_files(whole, task.solution);
      write_files(whole, task.hidden_tests);
      auto [code, out] = run_tests(whole, "hidden");
      INFO(files_text(task.solution) << files_text(task.hidden_tests) << out);
      CHECK(code == 0);
      CHECK(out.find(std::to_string(task.hidden_count) + " passed, 0 failed") != std::string::npos);
      // The workspace as the agent gets it: its holes fail the visible and the hidden tests.
      write_files(holed, task.workspace);
      write_files(holed, task.hidden_tests);
      CHECK(run_tests(holed, "tests").first == 1);
      auto [holed_code, holed_out] = run_tests(holed, "hidden");
      CHECK(holed_code == 1);
      CHECK(holed_out.find("NotImplementedError") != std::string::npos);
      ++tasks;
    }
  }
  CHECK(tasks == 10);
}

TEST_CASE("the workspace holds no hidden test and every hole raises until restored", "[envs][workspace]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto task = make_workspace_task(TaskSplit::train, seed, 3);
    INFO(task.id);
    CHECK(task.holes.size() == 3);
    CHECK(files_text(task.workspace).find("hidden/") == std::string::npos);
    std::size_t raises = 0;
    for (const auto& f : task.workspace) {
      CHECK(f.path.rfind("hidden", 0) != 0);
      if (f.path.rfind("pkg/", 0) != 0) continue;
      for (std::size_t at = f.text.find("raise NotImplementedError"); at != std::string::npos;
           at = f.text.find("raise NotImplementedError", at + 1))
        ++raises;
    }
    CHECK(raises == task.holes.size());
  }
}

TEST_CASE("held-out workspace tasks are held out by construction: other templates, names, constants and body shapes",
          "[envs][workspace]") {
  std::set<std::string> train_sources, train_names;  // names: functions', modules' and parameters'
  std::set<int> train_templates;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    const auto task = make_workspace_task(TaskSplit::train, seed, 1);
    train_templates.insert(task.template_index);
    for (const auto& f : task.functions) {
      train_sources.insert(normalised_source(f, task.functions));
      train_names.insert(f.name);
      train_names.insert(f.module);
      train_names.insert(f.params.begin(), f.params.end());
      CHECK(shape_split(expr_shape(f.body)) == TaskSplit::train);
    }
  }
  CHECK(train_names.size() > 3000);  // made up for each project: a policy must copy them, it cannot recall them
  std::set<int> held_templates;
  std::size_t held_functions = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const auto task = make_workspace_task(TaskSplit::held_out, seed, 1);
    held_templates.insert(task.template_index);
    for (const auto& f : task.functions) {
      ++held_functions;
      INFO(normalised_source(f, task.functions));
      CHECK(train_sources.count(normalised_source(f, task.functions)) == 0);  // not a training function renamed
      CHECK(train_names.count(f.name) == 0);
      CHECK(train_names.count(f.module) == 0);
      for (const auto& p : f.params) CHECK(train_names.count(p) == 0);
      CHECK(shape_split(expr_shape(f.body)) == TaskSplit::held_out);
    }
  }
  CHECK(held_functions > 1000);
  CHECK(train_sources.size() > 1000);  // the training space is not a handful of programs
  for (int t : held_templates) CHECK(train_templates.count(t) == 0);
  CHECK(train_templates.size() == static_cast<std::size_t>(kTrainTemplates));
  CHECK(held_templates.size() == static_cast<std::size_t>(kTemplates - kTrainTemplates));
}

TEST_CASE("a function's docstring says in words what its body computes, one reading per body", "[envs][workspace]") {
  // sorted([x for x in xs if x % 3 == 1])[:2], by hand.
  PyFunction f;
  f.name = "pick";
  f.params = {"xs"};
  f.param_types = {PyType::list};
  f.returns = PyType::list;
  PyExpr xs;
  xs.op = PyOp::param;
  xs.type = PyType::list;
  xs.index = 0;
  PyExpr keep;
  keep.op = PyOp::filter;
  keep.type = PyType::list;
  keep.cond = PyCond::mod_eq;
  keep.k = 3;
  keep.r = 1;
  keep.kids = {xs};
  PyExpr sort;
  sort.op = PyOp::sorted;
  sort.type = PyType::list;
  sort.kids = {keep};
  PyExpr take;
  take.op = PyOp::take_k;
  take.type = PyType::list;
  take.k = 2;
  take.kids = {sort};
  f.body = take;
  CHECK(describe_expr(f.body, f, {f}) ==
        "the first 2 items of ((the items x of xs where x modulo 3 is 1) sorted in ascending order)");

  // Generated projects: every function's docstring carries its body's
  // description, the holes' too, and no two different bodies read alike.
  std::map<std::string, std::string> source_of;
  for (const TaskSplit split : {TaskSplit::train, TaskSplit::held_out}) {
    for (std::uint64_t seed = 1; seed <= 150; ++seed) {
      const auto task = make_workspace_task(split, seed, 2);
      INFO(task.id);
      const auto workspace = files_text(task.workspace);
      for (const auto& fn : task.functions) {
        const auto words = describe_expr(fn.body, fn, task.functions);
        CHECK(workspace.find("\n    " + words + ".\n") != std::string::npos);
        const auto source = python_expr(fn.body, fn, task.functions);
        const auto [it, fresh] = source_of.emplace(words, source);
        INFO(words);
        CHECK(it->second == source);
      }
    }
  }
  CHECK(source_of.size() > 1000);
}

TEST_CASE("a difficulty-0 task's one hole is a body of one operation that training bodies use, and held out as any body",
          "[envs][workspace]") {
  // Operations are counted in a shape as its parentheses ("take_k(p)": one).
  const auto ops_of = [](const std::string& shape) { return std::count(shape.begin(), shape.end(), '('); };
  std::set<std::string> train_sources, train_shapes, plain_shapes[2];
  for (std::uint64_t seed = 0; seed < 300; ++seed)
    for (const int difficulty : {0, 1}) {
      const auto task = make_workspace_task(TaskSplit::train, seed, difficulty);
      for (const auto& f : task.functions) {
        train_sources.insert(normalised_source(f, task.functions));
        train_shapes.insert(expr_shape(f.body));
      }
    }
  for (const TaskSplit split : {TaskSplit::train, TaskSplit::held_out}) {
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      const auto task = make_workspace_task(split, seed, 0);
      INFO(task.id);
      CHECK(task.id == fmt::format("{}:{}:0", task_split_name(split), seed));
      REQUIRE(task.holes.size() == 1);
      const PyFunction& hole = task.functions.front();
      CHECK(task.holes.front() == hole.module + "." + hole.name);
      const std::string shape = expr_shape(hole.body);
      INFO(shape);
      CHECK(ops_of(shape) == 1);
      CHECK(shape_split(shape) == split);
      plain_shapes[static_cast<int>(split)].insert(shape);
      for (std::size_t i = 1; i < task.functions.size(); ++i) CHECK(ops_of(expr_shape(task.functions[i].body)) >= 2);
      if (split == TaskSplit::train) continue;
      CHECK(train_sources.count(normalised_source(hole, task.functions)) == 0);
      // Its operation is one training bodies use, around other operations.
      const std::string op = shape.substr(0, shape.find('(') + 1);
      CHECK(std::any_of(train_shapes.begin(), train_shapes.end(),
                        [&](const std::string& s) { return s != shape && s.find(op) != std::string::npos; }));
    }
  }
  // Many one-operation bodies in training (34 here), a few held out (4: join_k(p), min2(p,p), mul_k(p),
  // upper(p): the shapes the split's hash gives), none on both sides.
  CHECK(plain_shapes[0].size() >= 12);
  CHECK(plain_shapes[1].size() >= 4);
  for (const auto& s : plain_shapes[1]) CHECK(plain_shapes[0].count(s) == 0);
}

TEST_CASE("a generated replace never replaces a letter by itself", "[envs][workspace]") {
  // `text.replace('a', 'a')` is its text unchanged: a body that says one
  // thing and computes less.
  int replaces = 0;
  const std::function<void(const PyExpr&)> walk = [&](const PyExpr& e) {
    if (e.op == PyOp::replace_k) {
      ++replaces;
      CHECK(e.a != e.b);
    }
    for (const auto& k : e.kids) walk(k);
  };
  for (const TaskSplit split : {TaskSplit::train, TaskSplit::held_out})
    for (int difficulty = 0; difficulty <= 3; ++difficulty)
      for (std::uint64_t seed = 0; seed < 150; ++seed)
        for (const auto& f : make_workspace_task(split, seed, difficulty).functions) walk(f.body);
  // Each split draws from four letters: a draw of the same letter twice
  // would show within these (about one in four before the fix).
  CHECK(replaces >= 100);
}
