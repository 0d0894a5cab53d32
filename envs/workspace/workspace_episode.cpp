#include "envs/workspace/workspace_episode.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace rlx {

namespace {


const std::string* readme_of(const WorkspaceTask& task) {
  for (const auto& f : task.workspace)
    if (f.path == "README.md") return &f.text;
  return nullptr;
}

}  // namespace

const char* to_string(EpisodeEnd e) {
  switch (e) {
    case EpisodeEnd::running: return "running";
    case EpisodeEnd::submitted: return "submitted";
    case EpisodeEnd::turn_limit: return "turn_limit";
    case EpisodeEnd::budget: return "budget";
    case EpisodeEnd::machinery: return "machinery";
  }
  return "?";
}

std::string framed_observation(const std::string& text) {
  return "[out]\n" + text + (text.empty() || text.back() == '\n' ? "" : "\n") + "[end]\n";
}

std::string episode_prompt(const WorkspaceTask& task) {
  const std::string* readme = readme_of(task);
  return "Tools, one call per turn (a line that starts with @): @list | @read PATH [FIRST-LAST] | "
         "@write PATH, lines, @end | @replace PATH FIRST-LAST or NAME, lines, @end | @run | @submit\n" +
         framed_observation(readme ? *readme : "");
}

std::string task_family(const WorkspaceTask& task) {
  return std::string(task_split_name(task.split)) + "/t" + std::to_string(task.template_index);
}

WorkspaceEpisode::WorkspaceEpisode(WorkspaceTask task, EpisodeLimits limits, ToolBudget budget, WorkspaceLimits files)
    : task_(std::move(task)),
      limits_(limits),
      budget_(budget),
      files_(task_.workspace, files),
      prompt_(episode_prompt(task_)) {}

bool WorkspaceEpisode::on_hole_file(const ToolCall& call) const {
  if (call.kind != ToolKind::read && call.kind != ToolKind::replace && call.kind != ToolKind::write) return false;
  for (const auto& hole : task_.holes)
    if (call.path == hole_path(hole)) return true;
  return false;
}

TurnOutcome WorkspaceEpisode::take_turn(std::string_view text, const Sandbox& sandbox) {
  TurnOutcome out;
  if (done()) {
    out.done = true;
    return out;
  }
  ++stats_.turns;
  const ParsedTurn turn = parse_turn(text, true);
  out.kept = turn.state == ParsedTurn::State::call ? turn.end : text.size();
  ToolResult result;
  if (turn.state == ParsedTurn::State::call) {
    ++stats_.tool_calls;
    stats_.runs += turn.call.kind == ToolKind::run;
    result = run_tool(turn.call, files_, sandbox, budget_);
  } else {
    result = bad_turn(turn);
  }
  stats_.bad_calls += result.bad_call;
  if (result.bad_call && turn.state == ParsedTurn::State::call) --stats_.tool_calls;
  if (!result.bad_call && turn.state == ParsedTurn::State::call && on_hole_file(turn.call)) ++stats_.hole_file_calls;
  out.observation = framed_observation(result.observation);
  transcript_.append(text.substr(0, out.kept));
  if (!transcript_.empty() && transcript_.back() != '\n') transcript_ += '\n';
  transcript_ += out.observation;
  if (result.failure != InfraFailure::none) {
    failure_ = result.failure;
    end_ = EpisodeEnd::machinery;
  } else if (result.submitted) {
    end_ = EpisodeEnd::submitted;
  } else if (stats_.turns >= limits_.max_turns) {
    end_ = EpisodeEnd::turn_limit;
  }
  out.done = done();
  return out;
}

void WorkspaceEpisode::out_of_budget() {
  if (!done()) end_ = EpisodeEnd::budget;
}

int WorkspaceEpisode::holes_rewritten() const {
  int n = 0;
  for (const auto& hole : task_.holes) {
    const std::string path = hole_path(hole);
    const std::string* now = files_.find(path);
    const auto was = std::find_if(task_.workspace.begin(), task_.workspace.end(),
                                  [&](const WorkspaceFile& f) { return f.path == path; });
    if (!now || was == task_.workspace.end()) continue;  // the module is gone: nothing rewritten in it
    const auto a = split_lines(*now), b = split_lines(was->text);
    const BodyLines x = function_body(a, hole_function(hole)), y = function_body(b, hole_function(hole));
    if (!x.why.empty() || !y.why.empty()) continue;
    const auto body = [](const std::vector<std::string>& lines, const BodyLines& at) {
      return std::vector<std::string>(lines.begin() + (at.first - 1), lines.begin() + at.last);
    };
    n += body(a, x) != body(b, y);
  }
  return n;
}

std::string WorkspaceEpisode::payload() const { return encode_changes(files_.changed_from(task_.workspace)); }

std::vector<std::string> expert_turns(const WorkspaceTask& task) {
  std::vector<std::string> turns{"@run\n"};
  std::vector<std::string> fixes;
  for (const auto& whole : task.solution) {
    for (const auto& holed : task.workspace) {
      if (holed.path != whole.path || holed.text == whole.text) continue;
      const auto a = split_lines(holed.text), b = split_lines(whole.text);
      for (std::size_t first = 1; first <= a.size(); first += 60)
        turns.push_back(first == 1 && a.size() <= 60 ? fmt::format("@read {}\n", holed.path)
                                                      : fmt::format("@read {} {}-{}\n", holed.path, first, std::min(a.size(), first + 59)));
      // Each hole of this module by its function's name, its body the reference's.
      for (const auto& hole : task.holes) {
        if (hole_path(hole) != holed.path) continue;
        const std::string name = hole_function(hole);
        const BodyLines body = function_body(b, name);
        if (!body.why.empty()) throw std::logic_error("expert_turns: " + body.why + " in the reference (a generator bug)");
        std::string fix = fmt::format("@replace {} {}\n", holed.path, name);
        for (int i = body.first; i <= body.last; ++i) fix += b[static_cast<std::size_t>(i - 1)] + "\n";
        fixes.push_back(fix + "@end\n");
      }
    }
  }
  turns.insert(turns.end(), fixes.begin(), fixes.end());
  turns.push_back("@run\n");
  turns.push_back("@submit\n");
  return turns;
}

bool Transcript::target(std::size_t i) const {
  return i % 2 == 0 && std::find(mistaken.begin(), mistaken.end(), i) == mistaken.end();
}

Transcript expert_transcript(const WorkspaceTask& task, const Sandbox& sandbox, EpisodeLimits limits,
                             ToolBudget budget) {
  WorkspaceEpisode episode(task, limits, budget);
  Transcript t;
  t.prompt = episode.prompt();
  for (const auto& turn : expert_turns(task)) {
    const TurnOutcome out = episode.take_turn(turn, sandbox);
    t.parts.push_back(turn.substr(0, out.kept));
    if (out.done) break;
    t.parts.push_back(out.observation);
  }
  t.end = episode.end();
  t.failure = episode.failure();
  return t;
}

Transcript expert_drill(const WorkspaceTask& task, const Sandbox& sandbox, bool focused, ToolBudget budget) {
  WorkspaceEpisode episode(task, {}, budget);
  Transcript t;
  t.prompt = episode.prompt();
  for (auto turn : expert_turns(task)) {
    if (turn.rfind("@read ", 0) != 0 && turn.rfind("@replace ", 0) != 0) continue;  // no @run, no @submit
    if (focused && turn.rfind("@read ", 0) == 0) {
      // The hole's function alone: from its def line down to its raise.
      const std::string path = turn.substr(6, turn.find_first_of(" \n", 6) - 6);
      const auto* text = episode.files().find(path);
      const auto lines = text ? split_lines(*text) : std::vector<std::string>{};
      std::size_t hole = 0;
      while (hole < lines.size() && lines[hole].find("raise NotImplementedError") == std::string::npos) ++hole;
      if (hole == lines.size()) continue;  // not the hole's module
      std::size_t def = hole;
      while (def > 0 && lines[def].rfind("def ", 0) != 0) --def;
      turn = fmt::format("@read {} {}-{}\n", path, def + 1, hole + 1);
    }
    if (!t.parts.empty()) t.parts.push_back(episode.take_turn(t.parts.back(), sandbox).observation);
    t.parts.push_back(turn);
  }
  t.end = episode.end();  // running: the fix is the drill's last turn, never played
  return t;
}

std::optional<Transcript> recovery_drill(const WorkspaceTask& task, const Sandbox& sandbox, Mistake mistake, int cut,
                                         ToolBudget budget) {
  const Transcript drill = expert_drill(task, sandbox, mistake != Mistake::wrong_path, budget);
  if (task.holes.size() != 1 || drill.parts.size() != 3) return std::nullopt;  // read, observation, fix
  const std::string& fix = drill.parts[2];  // "@replace PATH NAME\n" and the body
  const std::size_t nl = fix.find('\n');
  const std::string path = hole_path(task.holes[0]), name = hole_function(task.holes[0]);
  const std::string command = "@replace " + path;
  if (fix.substr(0, nl) != command + " " + name) return std::nullopt;  // the expert's fix names the hole
  const auto cut_short = [cut](const std::string& s) {  // keeps at least one character
    const auto drop = std::min<std::size_t>(static_cast<std::size_t>(std::clamp(cut, 1, 3)), s.empty() ? 0 : s.size() - 1);
    return s.substr(0, s.size() - drop);
  };
  // Each turn and whether it is a mistake; the last (the fix) is never played.
  using Turn = std::pair<std::string, bool>;
  std::vector<Turn> turns{Turn{drill.parts[0], false}, Turn{fix, false}};
  switch (mistake) {
    case Mistake::wrong_path: {
      const std::size_t slash = path.find('/') + 1;  // pkg/STEM.py
      const std::string stem = path.substr(slash, path.size() - slash - 3);
      turns.insert(turns.begin(), Turn{"@read " + path.substr(0, slash) + cut_short(stem) + ".py\n", true});
      break;
    }
    case Mistake::wrong_name:
      turns.insert(turns.end() - 1, Turn{command + " " + cut_short(name) + fix.substr(nl), true});
      break;
    case Mistake::no_name:
      turns.insert(turns.end() - 1, Turn{command + "\n", true});
      turns.insert(turns.end() - 1, Turn{fix.substr(nl + 1), true});
      break;
  }
  WorkspaceEpisode episode(task, {}, budget);
  Transcript t;
  t.prompt = episode.prompt();
  for (std::size_t i = 0; i < turns.size(); ++i) {
    const auto& [turn, mistaken] = turns[i];
    if (mistaken) t.mistaken.push_back(t.parts.size());
    t.parts.push_back(turn);
    if (i + 1 == turns.size()) break;
    const TurnOutcome out = episode.take_turn(turn, sandbox);
    if (mistaken && out.observation.find("error: ") == std::string::npos) return std::nullopt;  // the cut name is real
    t.parts.push_back(out.observation);
  }
  t.end = episode.end();  // running, as a drill
  return t;
}

}  // namespace rlx
