#include "envs/workspace/agent_tools.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "envs/code/program_tests.hpp"

namespace rlx {

namespace {

constexpr const char* kTools =
    "@list, @read PATH [FIRST-LAST], @write PATH, @replace PATH FIRST-LAST, @replace PATH NAME, @run, @submit";

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

bool identifier(std::string_view s) {
  if (s.empty() || s.size() > 100 || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

std::size_t indent_of(const std::string& line) { return std::min(line.find_first_not_of(" \t"), line.size()); }
bool blank(const std::string& line) { return indent_of(line) == line.size(); }
bool ends_signature(const std::string& line) {
  const auto last = line.find_last_not_of(" \t");
  return last != std::string::npos && line[last] == ':';
}

// Whether `line` defines function `name`: "def NAME(" after its indentation (or "async def").
bool defines(const std::string& line, const std::string& name) {
  std::string_view s(line);
  s.remove_prefix(indent_of(line));
  if (s.rfind("async ", 0) == 0) s.remove_prefix(std::min(s.find_first_not_of(' ', 6), s.size()));
  if (s.rfind("def ", 0) != 0) return false;
  s.remove_prefix(std::min(s.find_first_not_of(' ', 4), s.size()));
  if (s.rfind(name, 0) != 0) return false;
  s.remove_prefix(name.size());
  s.remove_prefix(std::min(s.find_first_not_of(' '), s.size()));
  return !s.empty() && s.front() == '(';
}

// The triple quote still open at the end of `line`, given the one open at
// its start (empty for none): a body's string may run over lines at any
// indentation. (Quotes inside a one-line string or a comment are not told
// apart: a heuristic, as the rest of this scan is.)
std::string_view triple_quote_after(std::string_view line, std::string_view open) {
  static constexpr std::string_view kDouble = "\"\"\"", kSingle = "'''";
  std::size_t at = 0;
  for (;;) {
    if (!open.empty()) {
      const auto close = line.find(open, at);
      if (close == std::string_view::npos) return open;
      at = close + 3;
      open = {};
    }
    const auto d = line.find(kDouble, at), s = line.find(kSingle, at);
    if (d == std::string_view::npos && s == std::string_view::npos) return {};
    open = d < s ? kDouble : kSingle;
    at = std::min(d, s) + 3;
  }
}

// The line after the docstring that opens at lines[at] (the first
// statement of a body), or `at` when that line is no docstring.
std::size_t past_docstring(const std::vector<std::string>& lines, std::size_t at) {
  std::string_view s(lines[at]);
  s.remove_prefix(indent_of(lines[at]));
  if (!s.empty() && (s[0] == 'r' || s[0] == 'R' || s[0] == 'u' || s[0] == 'U')) s.remove_prefix(1);
  if (s.rfind("\"\"\"", 0) != 0 && s.rfind("'''", 0) != 0) return at;
  std::string_view open = triple_quote_after(lines[at], {});
  std::size_t next = at + 1;
  while (!open.empty() && next < lines.size()) open = triple_quote_after(lines[next++], open);
  return next;
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
      if (!want(replace ? 2 : 1, replace ? 2 : 1))
        return bad(replace ? "@replace PATH FIRST-LAST or @replace PATH NAME" : "@write PATH", t.end);
      t.call.kind = replace ? ToolKind::replace : ToolKind::write;
      t.call.path = std::string(w[1]);
      if (replace && identifier(w[2])) {
        t.call.function = std::string(w[2]);
      } else if (replace && (!parse_range(w[2], t.call.first, t.call.last) || t.call.first < 1 || t.call.last < t.call.first - 1)) {
        return bad(fmt::format("@replace takes lines FIRST-LAST with 1 <= FIRST <= LAST + 1, or a function's name (not '{}')",
                               w[2].substr(0, 40)), t.end);
      }
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

BodyLines function_body(const std::vector<std::string>& lines, const std::string& name) {
  std::vector<std::size_t> defs;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (defines(lines[i], name)) defs.push_back(i);
  if (defs.empty()) {
    std::string known;  // what the file does define, to copy from
    for (const auto& line : lines) {
      std::string_view d(line);
      d.remove_prefix(indent_of(line));
      if (d.rfind("def ", 0) != 0 || known.size() > 200) continue;
      d.remove_prefix(4);
      known += (known.empty() ? "" : ", ") + std::string(d.substr(0, std::min(d.find('('), d.size())));
    }
    return {0, 0, "no function " + name + (known.empty() ? " (it defines none)" : " (it defines " + known + ")")};
  }
  if (defs.size() > 1)
    return {0, 0, fmt::format("{} is defined more than once (lines {} and {}); replace lines instead", name, defs[0] + 1,
                              defs[1] + 1)};
  const std::size_t def = defs[0], depth = indent_of(lines[def]);
  std::size_t header = def;  // the signature's last line: the first that ends with ':'
  while (header < lines.size() && !ends_signature(lines[header])) {
    if (header > def && !blank(lines[header]) && indent_of(lines[header]) <= depth) break;
    ++header;
  }
  if (header == lines.size() || !ends_signature(lines[header]))
    return {0, 0, fmt::format("the def of {} (line {}) ends no line with ':' (a body on its def line?); replace lines instead",
                              name, def + 1)};
  // The docstring first (its lines may sit at any indentation), then the
  // block after it: every line indented deeper than the def, blank lines
  // inside it too, and every line of a triple-quoted string it opens.
  std::size_t first = header + 1;
  while (first < lines.size() && blank(lines[first])) ++first;
  if (first < lines.size() && indent_of(lines[first]) > depth) first = past_docstring(lines, first);
  std::size_t end = first;  // one past the block's last non-blank line
  std::string_view open;    // a triple quote the block has opened and not closed
  for (std::size_t i = first; i < lines.size(); ++i) {
    if (open.empty() && blank(lines[i])) continue;
    if (open.empty() && indent_of(lines[i]) <= depth) break;
    end = i + 1;
    open = triple_quote_after(lines[i], open);
  }
  while (first < end && blank(lines[first])) ++first;
  const int at = static_cast<int>(first) + 1;
  return {at, first < end ? static_cast<int>(end) : at - 1, ""};
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

namespace {

// "no file PATH", naming the files of PATH's folder (a misspelt name is
// the usual cause: the agent copies the right one from the error).
ToolResult no_file(const WorkspaceFiles& files, const std::string& path, const char* also) {
  const std::string folder = path.substr(0, path.rfind('/') + 1);  // "" at the top
  std::string beside;
  int named = 0;
  for (const auto& p : files.paths()) {
    if (p.rfind(folder, 0) != 0 || p.find('/', folder.size()) != std::string::npos) continue;
    if (++named <= 20) beside += (beside.empty() ? "" : ", ") + p;
  }
  if (named > 20) beside += fmt::format(" and {} more", named - 20);
  return refused(beside.empty() ? fmt::format("no file {} (@list shows the files{})", path, also)
                                : fmt::format("no file {} (files beside it: {}{})", path, beside, also));
}

}  // namespace

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
      if (!text) return no_file(files, call.path, "");
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
      if (!text) return no_file(files, call.path, "; @write makes one");
      auto lines = split_lines(*text);
      const int n = static_cast<int>(lines.size());
      int first = call.first, last = call.last;
      if (!call.function.empty()) {
        const BodyLines body = function_body(lines, call.function);
        if (!body.why.empty()) return refused(call.path + ": " + body.why);
        first = body.first;
        last = body.last;
      } else if (first > n + 1 || last > n) {
        return refused(fmt::format("{} has {} lines (asked to replace {}-{})", call.path, n, first, last));
      }
      const auto with = split_lines(call.body);
      lines.erase(lines.begin() + (first - 1), lines.begin() + last);
      lines.insert(lines.begin() + (first - 1), with.begin(), with.end());
      std::string joined;
      for (const auto& l : lines) joined += l + "\n";
      if (auto done = files.write(call.path, std::move(joined)); !done) return refused(done.error().message);
      const std::string what = call.function.empty() ? fmt::format("lines {}-{}", first, last)
                                                     : fmt::format("the body of {} (lines {}-{})", call.function, first, last);
      r.observation = fmt::format("{}: {} replaced by {} lines; it has {} lines now\n", call.path, what, with.size(),
                                  lines.size());
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
