#include "envs/workspace/agent_tools.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "envs/code/program_tests.hpp"

namespace rlx {

namespace {

constexpr const char* kTools = "@list, @read PATH [FIRST-LAST], @write PATH, @replace PATH FIRST-LAST, @run, @submit";

// A line of `text` from `at`: its bytes without the '\n', and whether the '\n' came.
struct Line {
  std::string_view text;
  bool ended = false;
  std::size_t next = 0;  // where the following line starts
};

Line line_at(std::string_view text, std::size_t at) {
  const auto nl = text.find('\n', at);
  if (nl == std::string_view::npos) return {text.substr(at), false, text.size()};
  return {text.substr(at, nl - at), true, nl + 1};
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    const auto j = std::min(s.find(' ', i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// "FIRST-LAST" into numbers, or false.
bool parse_range(std::string_view s, int& first, int& last) {
  const auto dash = s.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == s.size() || dash > 6 || s.size() - dash - 1 > 6) return false;
  int a = 0, b = 0;
  for (char c : s.substr(0, dash)) {
    if (c < '0' || c > '9') return false;
    a = a * 10 + (c - '0');
  }
  for (char c : s.substr(dash + 1)) {
    if (c < '0' || c > '9') return false;
    b = b * 10 + (c - '0');
  }
  first = a;
  last = b;
  return true;
}


ToolResult refused(std::string why) {
  ToolResult r;
  r.observation = "error: " + std::move(why);
  r.bad_call = true;
  return r;
}

ParsedTurn bad(std::string error, std::size_t end) {
  ParsedTurn t;
  t.state = ParsedTurn::State::bad;
  t.error = std::move(error);
  t.end = end;
  return t;
}

// The visible tests, as the README says to run them.
const char* kRunTests =
    "import runpy, sys\n"
    "sys.argv = ['run_tests.py', 'tests']\n"
    "runpy.run_path('/work/run_tests.py', run_name='__main__')\n";

}  // namespace

const char* tool_name(ToolKind k) {
  switch (k) {
    case ToolKind::list: return "list";
    case ToolKind::read: return "read";
    case ToolKind::write: return "write";
    case ToolKind::replace: return "replace";
    case ToolKind::run: return "run";
    case ToolKind::submit: return "submit";
  }
  return "?";
}

ParsedTurn parse_turn(std::string_view text, bool ended) {
  std::size_t at = 0;
  while (at < text.size()) {
    const Line line = line_at(text, at);
    if (line.text.empty() || line.text.front() != '@') {
      at = line.next;
      continue;
    }
    if (!line.ended && !ended) return {};  // the call line is still coming
    const auto w = words(line.text.substr(1));
    const std::string_view tool = w.empty() ? std::string_view() : w.front();
    ParsedTurn t;
    t.state = ParsedTurn::State::call;
    t.end = line.next;
    const auto args = w.size() - (w.empty() ? 0 : 1);
    const auto want = [&](std::size_t lo, std::size_t hi) { return args >= lo && args <= hi; };
    if (tool == "list" || tool == "run" || tool == "submit") {
      if (!want(0, 0)) return bad(fmt::format("@{} takes nothing after it", tool), t.end);
      t.call.kind = tool == "list" ? ToolKind::list : tool == "run" ? ToolKind::run : ToolKind::submit;
      return t;
    }
    if (tool == "read") {
      if (!want(1, 2)) return bad("@read PATH [FIRST-LAST]", t.end);
      t.call.kind = ToolKind::read;
      t.call.path = std::string(w[1]);
      if (args == 2 && (!parse_range(w[2], t.call.first, t.call.last) || t.call.first < 1 || t.call.last < t.call.first))
        return bad(fmt::format("@read's lines are FIRST-LAST with 1 <= FIRST <= LAST (not '{}')", w[2]), t.end);
      return t;
    }
    if (tool == "write" || tool == "replace") {
      const bool replace = tool == "replace";
      if (!want(replace ? 2 : 1, replace ? 2 : 1)) return bad(replace ? "@replace PATH FIRST-LAST" : "@write PATH", t.end);
      t.call.kind = replace ? ToolKind::replace : ToolKind::write;
      t.call.path = std::string(w[1]);
      if (replace && (!parse_range(w[2], t.call.first, t.call.last) || t.call.first < 1 || t.call.last < t.call.first - 1))
        return bad(fmt::format("@replace's lines are FIRST-LAST with 1 <= FIRST <= LAST + 1 (not '{}')", w[2]), t.end);
      // The body: every line up to "@end".
      for (std::size_t b = line.next; b < text.size();) {
        const Line body = line_at(text, b);
        if (body.text == "@end" && (body.ended || ended)) {
          t.call.body = std::string(text.substr(line.next, b - line.next));
          t.end = body.next;
          return t;
        }
        b = body.next;
      }
      if (!ended) return {};
      return bad(fmt::format("no line \"@end\" closes the @{}", tool), text.size());
    }
    if (tool == "end") return bad("\"@end\" closes a @write or @replace; there is none open", t.end);
    return bad(fmt::format("no tool '@{}' (tools: {})", std::string(tool).substr(0, 40), kTools), t.end);
  }
  if (!ended) return {};
  return bad(fmt::format("no tool call in this turn (a call is a line that starts with '@': {})", kTools), text.size());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto nl = std::min(text.find('\n', at), text.size());
    out.emplace_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

ToolResult bad_turn(const ParsedTurn& turn) { return refused(turn.error); }

std::string cut_output(const std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  const std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  const auto nl = trimmed.rfind('\n');
  std::string last = nl == std::string::npos ? std::string() : trimmed.substr(nl + 1);
  if (last.size() > bytes / 4) last.clear();
  const std::string marker = fmt::format("... ({} bytes cut)\n", text.size());
  const std::size_t head = bytes > last.size() + marker.size() + 1 ? bytes - last.size() - marker.size() - 1 : 0;
  std::string out = text.substr(0, head);
  if (!out.empty() && out.back() != '\n') out.resize(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  return out + marker + (last.empty() ? "" : last + "\n");
}

ToolResult run_tool(const ToolCall& call, WorkspaceFiles& files, const Sandbox& sandbox, const ToolBudget& budget) {
  ToolResult r;
  switch (call.kind) {
    case ToolKind::list: {
      for (const auto& p : files.paths()) {
        const std::string& text = *files.find(p);
        r.observation += fmt::format("{} ({} lines)\n", p, split_lines(text).size());
      }
      break;
    }
    case ToolKind::read: {
      if (auto why = bad_workspace_path(call.path); !why.empty()) return refused(why);
      const std::string* text = files.find(call.path);
      if (!text) return refused("no file " + call.path + " (@list shows the files)");
      const auto lines = split_lines(*text);
      const int n = static_cast<int>(lines.size());
      const int first = call.first > 0 ? call.first : 1;
      if (first > std::max(n, 1)) return refused(fmt::format("{} has {} lines", call.path, n));
      const int last = std::min({call.last > 0 ? call.last : n, n, first + budget.read_lines - 1});
      r.observation = n == 0 ? call.path + " is empty\n" : fmt::format("{} lines {}-{} of {}:\n", call.path, first, last, n);
      for (int i = first; i <= last; ++i) r.observation += fmt::format("{:4}| {}\n", i, lines[static_cast<std::size_t>(i - 1)]);
      break;
    }
    case ToolKind::write: {
      if (auto done = files.write(call.path, call.body); !done) return refused(done.error().message);
      r.observation = fmt::format("wrote {} ({} lines)\n", call.path, split_lines(call.body).size());
      break;
    }
    case ToolKind::replace: {
      if (auto why = bad_workspace_path(call.path); !why.empty()) return refused(why);
      const std::string* text = files.find(call.path);
      if (!text) return refused("no file " + call.path + " (@list shows the files; @write makes one)");
      auto lines = split_lines(*text);
      const int n = static_cast<int>(lines.size());
      if (call.first > n + 1 || call.last > n)
        return refused(fmt::format("{} has {} lines (asked to replace {}-{})", call.path, n, call.first, call.last));
      const auto with = split_lines(call.body);
      lines.erase(lines.begin() + (call.first - 1), lines.begin() + call.last);
      lines.insert(lines.begin() + (call.first - 1), with.begin(), with.end());
      std::string joined;
      for (const auto& l : lines) joined += l + "\n";
      if (auto done = files.write(call.path, std::move(joined)); !done) return refused(done.error().message);
      r.observation = fmt::format("{}: lines {}-{} replaced by {} lines; it has {} lines now\n", call.path, call.first,
                                  call.last, with.size(), lines.size());
      break;
    }
    case ToolKind::run: {
      auto dir = ScratchDir::make("rlx-workspace");
      if (!dir) {
        r.failure = InfraFailure::sandbox_start;
        r.observation = "error: the tests could not run (" + dir.error().message + ")\n";
        return r;
      }
      if (auto written = files.materialise(dir->path()); !written) {
        r.failure = InfraFailure::sandbox_start;
        r.observation = "error: the tests could not run (" + written.error().message + ")\n";
        return r;
      }
      const SandboxRun run = sandbox.run_in(dir->path().string(), kRunTests, "");
      r.failure = machinery_failure(run);
      std::string out = run.out + run.err;
      if (!run.ok() && run.end != SandboxRun::End::exited) out += "(" + run.reason() + ")\n";
      r.observation = cut_output(out, budget.observation_bytes);
      return r;
    }
    case ToolKind::submit:
      r.submitted = true;
      r.observation = "submitted\n";
      break;
  }
  r.observation = cut_output(r.observation, budget.observation_bytes);
  return r;
}

}  // namespace rlx
