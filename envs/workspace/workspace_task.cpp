#include "envs/workspace/workspace_task.hpp"

#include "envs/workspace/task_names.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace rlx {

namespace {

// A project's shape: modules, functions per module, and the return types it favours.
struct ProjectTemplate {
  int modules;
  int functions_per_module;
  std::vector<PyType> returns;  // drawn from, in turn
};

const ProjectTemplate& project_template(int index) {
  static const std::vector<ProjectTemplate> all = {
      {2, 2, {PyType::integer, PyType::list}},
      {2, 3, {PyType::integer, PyType::integer, PyType::text}},
      {3, 2, {PyType::list, PyType::integer}},
      {2, 2, {PyType::text, PyType::integer}},
      {3, 2, {PyType::integer, PyType::text, PyType::list}},
      {2, 3, {PyType::list, PyType::text}},
      // held out
      {3, 3, {PyType::text, PyType::list, PyType::integer}},
      {4, 2, {PyType::integer, PyType::list, PyType::list}},
  };
  return all.at(static_cast<std::size_t>(index));
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int operations(const PyExpr& e) {
  int n = (e.op == PyOp::param || e.op == PyOp::constant || e.op == PyOp::item) ? 0 : 1;
  for (const auto& k : e.kids) n += operations(k);
  return n;
}

// How deep a function's calls go (1: it calls nothing).
int call_level(const PyExpr& e, const std::vector<int>& levels) {
  int l = 1;
  if (e.op == PyOp::call) l = levels.at(static_cast<std::size_t>(e.index)) + 1;
  for (const auto& k : e.kids) l = std::max(l, call_level(k, levels));
  return l;
}

void callees(const PyExpr& e, std::set<int>& out) {
  if (e.op == PyOp::call) out.insert(e.index);
  for (const auto& k : e.kids) callees(k, out);
}

std::vector<PyType> param_types_for(PyType returns, std::mt19937_64& rng) {
  // One argument of the type it returns (lists and texts need one), and often a second.
  std::vector<PyType> t = {returns};
  if (rng() % 2 == 0) t.push_back(static_cast<PyType>(rng() % 3));
  if (returns == PyType::integer && rng() % 2 == 0) t[0] = rng() % 2 ? PyType::list : PyType::text;
  return t;
}

std::string describe(PyType t) {
  switch (t) {
    case PyType::integer: return "an integer";
    case PyType::list: return "a list of integers";
    case PyType::text: return "a string";
  }
  return "?";
}

std::string call_text(const PyFunction& f, const std::vector<PyValue>& args) {
  std::string s = f.name + "(";
  for (std::size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + python_value(args[i]);
  return s + ")";
}

struct Case {
  std::vector<PyValue> args;
  PyValue expected;
};

// Edge-case arguments: empty lists and strings, zero.
std::vector<PyValue> edge_args(const std::vector<PyType>& types, std::mt19937_64& rng) {
  auto args = random_args(types, rng);
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] == PyType::list) args[i] = std::vector<std::int64_t>{};
    if (types[i] == PyType::text) args[i] = std::string();
    if (types[i] == PyType::integer) args[i] = std::int64_t{0};
  }
  return args;
}

std::string test_file(const std::string& module, const std::vector<std::pair<const PyFunction*, std::vector<Case>>>& cases) {
  std::string imports, body;
  for (const auto& [f, list] : cases) {
    if (list.empty()) continue;
    imports += fmt::format("from pkg.{} import {}\n", module, f->name);
    for (std::size_t i = 0; i < list.size(); ++i)
      body += fmt::format("\n\ndef test_{}_{}():\n    assert {} == {}\n", f->name, i, call_text(*f, list[i].args),
                          python_value(list[i].expected));
  }
  return imports + body;
}

}  // namespace

std::string hole_path(const std::string& hole) { return "pkg/" + hole.substr(0, hole.find('.')) + ".py"; }
std::string hole_function(const std::string& hole) { return hole.substr(hole.find('.') + 1); }

const char* task_split_name(TaskSplit s) { return s == TaskSplit::train ? "train" : "held_out"; }

TaskSplit shape_split(const std::string& shape) {
  return fnv1a(shape) % 4 == 0 ? TaskSplit::held_out : TaskSplit::train;
}

namespace {

// `f` as "def f(a0, ...): return ..." with callees named as `renamed` names them.
std::string normal_text(const PyFunction& f, const std::vector<PyFunction>& renamed) {
  PyFunction g = f;
  for (std::size_t i = 0; i < g.params.size(); ++i) g.params[i] = "a" + std::to_string(i);
  std::string s = "def f(";
  for (std::size_t i = 0; i < g.params.size(); ++i) s += (i ? ", " : "") + g.params[i];
  return s + "):\n    return " + python_expr(g.body, g, renamed) + "\n";
}

}  // namespace

std::string normalised_source(const PyFunction& f, const std::vector<PyFunction>& project) {
  // A callee is named by what it computes (a hash of its own normalised
  // source; callees come before their callers), so two functions are equal
  // only when their callees are too.
  std::vector<PyFunction> renamed = project;
  for (auto& p : renamed) p.name = fmt::format("g{:016x}", fnv1a(normal_text(p, renamed)));
  return normal_text(f, renamed);
}

const std::string& test_runner_source() {
  static const std::string source = R"PY("""Runs every test_* function of FOLDER/test_*.py: python3 run_tests.py FOLDER"""
import importlib.util
import pathlib
import sys


def main(folder):
    root = pathlib.Path(__file__).resolve().parent
    sys.path.insert(0, str(root))
    passed = failed = 0
    for path in sorted((root / folder).glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            print(f"ERROR {path.name}: {type(e).__name__}: {e}"[:300])
            failed += 1
            continue
        for name in sorted(n for n in dir(module) if n.startswith("test_")):
            try:
                getattr(module, name)()
                passed += 1
            except Exception as e:
                failed += 1
                print(f"FAILED {path.name}::{name}: {type(e).__name__}: {e}"[:300])
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tests"))
)PY";
  return source;
}

std::string workspace_readme(const std::vector<std::string>& holes) {
  std::string readme = "# A project with missing functions\n\nThese functions raise NotImplementedError and must be restored:\n\n";
  for (const auto& h : holes) readme += "- `" + h + "`\n";
  readme += "\nTheir docstrings and the other functions say what they compute. Run the tests with "
            "`python3 run_tests.py tests`; more tests than these decide whether the work is right.\n";
  return readme;
}

WorkspaceTask make_workspace_task(TaskSplit split, std::uint64_t seed, int difficulty) {
  std::mt19937_64 rng(fnv1a(std::string(task_split_name(split)) + ":" + std::to_string(seed)));
  WorkspaceTask task;
  task.split = split;
  task.difficulty = std::clamp(difficulty, 0, 3);
  task.id = fmt::format("{}:{}:{}", task_split_name(split), seed, task.difficulty);
  task.template_index = split == TaskSplit::train ? static_cast<int>(rng() % kTrainTemplates)
                                                  : kTrainTemplates + static_cast<int>(rng() % (kTemplates - kTrainTemplates));
  const ProjectTemplate& tpl = project_template(task.template_index);

  PyVocabulary vocab = split_vocabulary(split);
  for (int op = 0; op < kPyOps; ++op) vocab.ops.insert(static_cast<PyOp>(op));
  const std::vector<std::string> modules = module_names(split, tpl.modules, rng);

  std::vector<PyFunction>& fns = task.functions;
  std::vector<int> levels;
  std::set<std::string> taken;
  std::size_t turn = 0;
  for (const auto& module : modules) {
    for (int j = 0; j < tpl.functions_per_module; ++j) {
      PyFunction f;
      f.module = module;
      f.name = function_name(split, taken, rng);
      f.returns = tpl.returns[turn++ % tpl.returns.size()];
      f.param_types = param_types_for(f.returns, rng);
      const auto draw_params = [&] {
        f.params.clear();
        for (auto t : f.param_types) {
          // Drawn, two of a type never alike: a name is to be read, not recalled.
          std::string name;
          do name = param_name(split, t, rng);
          while (std::find(f.params.begin(), f.params.end(), name) != f.params.end());
          f.params.push_back(name);
        }
      };
      draw_params();
      // Difficulty 0: the first function is the hole, and its body is one
      // operation over its parameters (of a shape of this split, as any body).
      const bool plain = task.difficulty == 0 && fns.empty();
      // Calls go at most three functions deep (values stay within 64 bits).
      std::vector<PyFunction> callable;
      for (std::size_t i = 0; i < fns.size(); ++i) callable.push_back(levels[i] < 3 ? fns[i] : PyFunction{"", {}, {}, PyType(255), {}, ""});
      for (int attempt = 0;; ++attempt) {
        if (attempt > 20000) throw std::logic_error("workspace task: no body of this split's shapes (a generator bug)");
        if (plain && attempt > 0 && attempt % 500 == 0) {  // these parameters may allow no one-operation body of the split
          f.param_types = param_types_for(f.returns, rng);
          draw_params();
        }
        f.body = random_expr(f.returns, plain ? 1 : 2 + static_cast<int>(rng() % 2), f, callable, vocab, rng);
        if (shape_split(expr_shape(f.body)) != split) continue;  // never relaxed: it holds the splits apart
        if (plain ? operations(f.body) != 1 : operations(f.body) < 2 && attempt < 2000) continue;
        // Not constant over inputs: a test must tell a restored body from a guess.
        std::set<std::string> outputs;
        for (int i = 0; i < 8; ++i) outputs.insert(python_value(call_function(f, random_args(f.param_types, rng), fns)));
        if (outputs.size() >= 3 || (!plain && attempt >= 2000)) break;  // a one-operation body is never constant
      }
      levels.push_back(call_level(f.body, levels));
      fns.push_back(std::move(f));
    }
  }

  // Tests: 6 cases and an edge case per function; the first 2 are visible.
  std::map<std::string, std::vector<std::pair<const PyFunction*, std::vector<Case>>>> visible, hidden;
  for (const auto& f : fns) {
    std::vector<Case> all;
    for (int i = 0; i < 6; ++i) {
      auto args = random_args(f.param_types, rng);
      all.push_back({args, call_function(f, args, fns)});
    }
    auto edge = edge_args(f.param_types, rng);
    all.push_back({edge, call_function(f, edge, fns)});
    visible[f.module].push_back({&f, std::vector<Case>(all.begin(), all.begin() + 2)});
    hidden[f.module].push_back({&f, all});
    task.visible_count += 2;
    task.hidden_count += all.size();
  }

  // Holes: functions others call first (the evidence is spread), then any.
  // (The hidden cases are listed after the holes are known.)
  std::set<int> called;
  for (const auto& f : fns) callees(f.body, called);
  std::vector<int> order(fns.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return called.count(a) > called.count(b); });
  const auto removed = std::min<std::size_t>(order.size(), static_cast<std::size_t>(task.difficulty));
  const std::set<int> holes = task.difficulty == 0 ? std::set<int>{0}  // the one-operation body
                                                   : std::set<int>(order.begin(), order.begin() + removed);
  for (int h : holes) task.holes.push_back(fns[static_cast<std::size_t>(h)].module + "." + fns[static_cast<std::size_t>(h)].name);
  // Broken by the holes: a hole, or a function that calls a broken one
  // (callees come first).
  std::vector<bool> broken(fns.size());
  for (std::size_t i = 0; i < fns.size(); ++i) {
    std::set<int> calls;
    callees(fns[i].body, calls);
    broken[i] = holes.count(static_cast<int>(i)) > 0 ||
                std::any_of(calls.begin(), calls.end(), [&](int c) { return broken[static_cast<std::size_t>(c)]; });
  }
  for (const auto& [module, per_function] : hidden)
    for (const auto& [f, cases] : per_function)
      for (const auto& c : cases)
        task.hidden_cases.push_back({module, f->name, c.args, c.expected, broken[static_cast<std::size_t>(f - fns.data())]});

  // The modules, whole and with holes.
  for (const auto& module : modules) {
    std::set<int> uses;
    for (const auto& f : fns)
      if (f.module == module) callees(f.body, uses);
    std::map<std::string, std::vector<std::string>> imports;
    for (int u : uses)
      if (fns[static_cast<std::size_t>(u)].module != module) imports[fns[static_cast<std::size_t>(u)].module].push_back(fns[static_cast<std::size_t>(u)].name);
    std::string head = fmt::format("\"\"\"The {} module.\"\"\"\n", module);
    for (const auto& [from, names] : imports) {
      head += fmt::format("from pkg.{} import ", from);
      for (std::size_t i = 0; i < names.size(); ++i) head += (i ? ", " : "") + names[i];
      head += "\n";
    }
    std::string whole = head, holed = head;
    for (std::size_t i = 0; i < fns.size(); ++i) {
      const auto& f = fns[i];
      if (f.module != module) continue;
      std::string sig = "\n\ndef " + f.name + "(";
      for (std::size_t p = 0; p < f.params.size(); ++p) sig += (p ? ", " : "") + f.params[p];
      sig += "):\n";
      std::vector<PyValue> eg_args;
      PyValue eg;
      for (const auto& [g, cases] : visible[module])
        if (g == &f) {
          eg_args = cases.front().args;
          eg = cases.front().expected;
        }
      std::string doc = "    \"\"\"Returns " + describe(f.returns) + " computed from ";
      for (std::size_t p = 0; p < f.params.size(); ++p)
        doc += (p ? " and " : "") + f.params[p] + " (" + py_type_name(f.param_types[p]) + ")";
      doc += ":\n    " + describe_expr(f.body, f, fns) + ".\n\n    >>> " + call_text(f, eg_args) + "\n    " + python_value(eg) + "\n    \"\"\"\n";
      const std::string body = "    return " + python_expr(f.body, f, fns) + "\n";
      whole += sig + doc + body;
      holed += sig + doc + (holes.count(static_cast<int>(i)) ? "    raise NotImplementedError(\"restore this function\")\n" : body);
    }
    task.solution.push_back({"pkg/" + module + ".py", whole});
    task.workspace.push_back({"pkg/" + module + ".py", holed});
    task.workspace.push_back({"tests/test_" + module + ".py", test_file(module, visible[module])});
    task.hidden_tests.push_back({"hidden/test_" + module + ".py", test_file(module, hidden[module])});
  }
  task.workspace.push_back({"pkg/__init__.py", ""});
  task.workspace.push_back({"run_tests.py", test_runner_source()});
  task.workspace.push_back({"README.md", workspace_readme(task.holes)});
  task.solution.push_back({"pkg/__init__.py", ""});
  return task;
}

WorkspaceTask single_hole_task(const WorkspaceTask& task, std::size_t index) {
  const PyFunction& f = task.functions.at(index);
  WorkspaceTask drill = task;
  drill.id = task.id + "/drill:" + f.module + "." + f.name;
  drill.difficulty = 1;
  drill.holes = {f.module + "." + f.name};
  const std::string path = "pkg/" + f.module + ".py";
  for (auto& file : drill.workspace) {
    for (const auto& whole : task.solution)
      if (whole.path == file.path) file.text = whole.text;  // every other body restored
    if (file.path == "README.md") file.text = workspace_readme(drill.holes);
    if (file.path != path) continue;
    // The body follows the docstring: the first "    return " line after "def NAME(".
    const auto def = file.text.find("\ndef " + f.name + "(");
    const auto body = def == std::string::npos ? def : file.text.find("\n    return ", def);
    if (body == std::string::npos) throw std::logic_error("single_hole_task: no body for " + f.name);
    const auto end = file.text.find('\n', body + 1);
    file.text.replace(body + 1, end - body - 1, "    raise NotImplementedError(\"restore this function\")");
  }
  drill.hidden_cases.clear();  // a drill is never scored: its hidden tests would need the broken marks redone
  drill.hidden_tests.clear();
  return drill;
}

Result<WorkspaceTask> workspace_task(const std::string& id) {
  // split:seed:difficulty, each part whole and in range.
  const auto a = id.find(':'), b = a == std::string::npos ? a : id.find(':', a + 1);
  if (b == std::string::npos || id.size() > 64) return make_error(Errc::invalid_field, "not a workspace task id: '" + id.substr(0, 64) + "'");
  const std::string split = id.substr(0, a), seed = id.substr(a + 1, b - a - 1), difficulty = id.substr(b + 1);
  const auto digits = [](const std::string& s, std::size_t most) {
    return !s.empty() && s.size() <= most && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if ((split != "train" && split != "held_out") || !digits(seed, 19) || !digits(difficulty, 1) || difficulty > "3")
    return make_error(Errc::invalid_field, "not a workspace task id: '" + id + "' (want train|held_out:SEED:0-3)");
  return make_workspace_task(split == "train" ? TaskSplit::train : TaskSplit::held_out, std::stoull(seed),
                             std::stoi(difficulty));
}

}  // namespace rlx
