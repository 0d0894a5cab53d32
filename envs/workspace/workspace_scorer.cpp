#include "envs/workspace/workspace_scorer.hpp"

#include <cctype>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "envs/code/program_tests.hpp"

namespace rlx {

namespace {

// Reads every case before any of the agent's code runs, then imports the
// package from /work and calls each function; one tagged line per case.
constexpr const char* kHarness = R"PY(import importlib, json, sys
_lines = sys.stdin.read().split("\n")[:-1]
_tag = _lines[0]
sys.path.insert(0, "/work")
for _i, _case in enumerate(_lines[1:]):
    _module, _function, _args = _case.split(" ", 2)
    try:
        _f = getattr(importlib.import_module("pkg." + _module), _function)
        _answer = json.dumps(_f(*json.loads(_args)), separators=(",", ":"), sort_keys=True)
    except BaseException as _e:
        _answer = "!" + type(_e).__name__
    sys.stdout.write("%s %d %s\n" % (_tag, _i, _answer))
    sys.stdout.flush()
)PY";

bool identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\b') out += "\\b";
    else if (c == '\f') out += "\\f";
    else if (c < 0x20) out += fmt::format("\\u{:04x}", c);  // as json.dumps; the generator's strings are ASCII
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string json_args(const std::vector<PyValue>& args) {
  std::string out = "[";
  for (std::size_t i = 0; i < args.size(); ++i) out += (i ? "," : "") + json_value(args[i]);
  return out + "]";
}


}  // namespace

bool scored_source(const std::string& path) {
  if (path.size() < 8 || path.compare(0, 4, "pkg/") != 0 || path.compare(path.size() - 3, 3, ".py") != 0) return false;
  const std::string name = path.substr(4, path.size() - 7);
  static const std::set<std::string> hooks = {"__init__", "__main__", "conftest", "sitecustomize", "usercustomize"};
  return identifier(name) && !hooks.count(name) && name.rfind("test", 0) != 0;
}

std::string json_value(const PyValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&v)) return json_string(*s);
  const auto& list = std::get<std::vector<std::int64_t>>(v);
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + std::to_string(list[i]);
  return out + "]";
}

WorkspaceScore score_workspace(const Sandbox& sandbox, const WorkspaceTask& task, const std::vector<WorkspaceFile>& changes) {
  WorkspaceScore s;
  // The fresh copy: the package as the task made it, then the agent's source modules.
  std::vector<WorkspaceFile> package;
  for (const auto& f : task.workspace)
    if (f.path.rfind("pkg/", 0) == 0) package.push_back(f);
  WorkspaceFiles copy(package);
  for (const auto& c : changes) {
    if (!scored_source(c.path)) {
      s.ignored.push_back(c.path);
      continue;
    }
    if (auto done = copy.write(c.path, c.text); !done) s.ignored.push_back(c.path + " (" + done.error().message + ")");
  }
  auto dir = ScratchDir::make("rlx-score");
  Result<void> written = dir ? copy.materialise(dir->path()) : Result<void>(dir.error());
  if (!written) {
    s.failure = InfraFailure::sandbox_start;
    s.reason = "not scored (sandbox_start): " + written.error().message;
    return s;
  }

  const std::string tag = fmt::format("\x1eRLX{:016x}", std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}());
  std::string input = tag + "\n";
  for (const auto& c : task.hidden_cases) input += c.module + " " + c.function + " " + json_args(c.args) + "\n";
  s.run = sandbox.run_in(dir->path().string(), kHarness, input);

  std::map<std::size_t, std::string> answers;
  std::istringstream lines(s.run.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, tag.size() + 1, tag + " ") != 0) continue;
    std::istringstream rest(line.substr(tag.size() + 1));
    std::size_t i = 0;
    std::string answer;
    if (rest >> i && rest.get() == ' ' && std::getline(rest, answer) && !answers.count(i)) answers[i] = answer;
  }
  std::string first_broken, first_failed;  // a kept test that fails; a broken one that still does
  for (std::size_t i = 0; i < task.hidden_cases.size(); ++i) {
    const WorkspaceCase& c = task.hidden_cases[i];
    const auto a = answers.find(i);
    const bool pass = a != answers.end() && a->second == json_value(c.expected);
    (c.broken ? s.broken_total : s.kept_total) += 1;
    (c.broken ? s.broken_passed : s.kept_passed) += pass ? 1 : 0;
    std::string& first = c.broken ? first_failed : first_broken;
    if (!pass && first.empty())
      first = c.module + "." + c.function +
              (a == answers.end() ? " gave no answer" : a->second.rfind('!', 0) == 0 ? " raised " + a->second.substr(1) : " answered wrong");
  }
  const std::string ignored = s.ignored.empty() ? "" : "; ignored " + fmt::format("{}", fmt::join(s.ignored, ", "));
  if ((s.failure = machinery_failure(s.run)) != InfraFailure::none) {
    s.broken_passed = s.kept_passed = 0;
    const std::string err = last_line(s.run.err);
    s.reason = "not scored (" + std::string(to_string(s.failure)) + "): " + s.run.reason() + (err.empty() ? "" : " (" + err + ")");
    return s;
  }
  if (!s.run.ok()) {
    // The harness catches every exception: only the agent's code ends it early.
    const std::string err = last_line(s.run.err);
    s.reason = "scored 0: " + s.run.reason() + (err.empty() ? "" : " (" + err + ")") + ignored;
    return s;
  }
  if (s.kept_passed < s.kept_total) {
    s.reason = fmt::format("scored 0: {} of {} hidden tests that passed before the change fail (first: {}){}",
                           s.kept_total - s.kept_passed, s.kept_total, first_broken, ignored);
    return s;
  }
  s.reward = s.broken_total ? static_cast<double>(s.broken_passed) / static_cast<double>(s.broken_total) : 1.0;
  s.solved = s.broken_passed == s.broken_total;
  s.reason = s.solved ? fmt::format("passed all {} hidden tests{}", s.broken_total + s.kept_total, ignored)
                      : fmt::format("passed {} of the {} hidden tests the holes break (first failed: {}){}", s.broken_passed,
                                    s.broken_total, first_failed, ignored);
  return s;
}

std::string score_outcome(double reward, const std::string& reason) {
  if (reward >= 1.0) return "passed";
  if (const auto at = reason.find(" raised "); at != std::string::npos) {
    const auto from = at + 8;
    auto end = from;
    while (end < reason.size() && (std::isalnum(static_cast<unsigned char>(reason[end])) || reason[end] == '_')) ++end;
    if (end > from) return reason.substr(from, end - from);
  }
  if (reason.find(" answered wrong") != std::string::npos) return "wrong answer";
  if (reason.find(" gave no answer") != std::string::npos) return "no answer";
  return "ended early";
}

Result<std::shared_ptr<const WorkspaceScorer>> WorkspaceScorer::open(const SandboxOptions& options) {
  auto sandbox = Sandbox::open(options);
  if (!sandbox) return sandbox.error();
  return std::shared_ptr<const WorkspaceScorer>(new WorkspaceScorer(std::move(*sandbox)));
}

RewardResultData WorkspaceScorer::score(const RewardRequestData& request) const {
  RewardResultData out;
  out.request_id = request.request_id;
  auto task = workspace_task(request.task);
  auto changes = task ? decode_changes(request.payload) : Result<std::vector<WorkspaceFile>>(task.error());
  if (!changes) return not_scored(request.request_id, InfraFailure::bad_request, changes.error().message);
  const WorkspaceScore s = score_workspace(sandbox_, *task, *changes);
  if (s.failure != InfraFailure::none) return not_scored(request.request_id, s.failure, s.reason);
  out.reason = s.reason;
  out.score = static_cast<float>(s.reward);
  return out;
}

}  // namespace rlx
