#include "envs/workspace/tool_service.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "envs/workspace/workspace_scorer.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;

// A request line longer than this is refused (a turn's text is a few KiB).
constexpr std::size_t kMaxToolRequestBytes = 4u << 20;

json tool_request_refused(std::string_view why) { return {{"ok", false}, {"error", why}}; }

// The field `key` of `req` as text, or nullptr when it is missing or not a string.
const std::string* tool_request_text(const json& req, const char* key) {
  auto it = req.find(key);
  return it != req.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

json episode_stats_json(const WorkspaceEpisode& e) {
  const auto& s = e.stats();
  return {{"end", to_string(e.end())}, {"turns", s.turns}, {"tool_calls", s.tool_calls}, {"bad_calls", s.bad_calls},
          {"runs", s.runs}};
}

}  // namespace

WorkspaceToolService::WorkspaceToolService(const Sandbox& sandbox, EpisodeLimits limits, ToolBudget budget)
    : sandbox_(&sandbox), limits_(limits), budget_(budget) {}

std::string WorkspaceToolService::answer(std::string_view line) {
  ++requests_;
  const json reply = [&]() -> json {
    if (line.size() > kMaxToolRequestBytes) return tool_request_refused("the request is longer than 4 MiB");
    const json req = json::parse(line, nullptr, false);
    if (req.is_discarded() || !req.is_object()) return tool_request_refused("the request is not a JSON object");
    const std::string* op = tool_request_text(req, "op");
    if (!op) return tool_request_refused("the request has no `op` (start, complete, turn, out_of_budget, score)");
    if (*op == "start") {
      const std::string* id = tool_request_text(req, "task");
      if (!id) return tool_request_refused("start: `task` must be a task id such as \"train:12:1\"");
      auto task = workspace_task(*id);
      if (!task) return tool_request_refused("start: " + task.error().message);
      episode_.emplace(std::move(*task), limits_, budget_);
      return {{"ok", true}, {"task", *id}, {"family", task_family(episode_->task())}, {"prompt", episode_->prompt()},
              {"max_turns", limits_.max_turns}};
    }
    if (*op != "complete" && *op != "turn" && *op != "out_of_budget" && *op != "score")
      return tool_request_refused("unknown op `" + *op + "` (start, complete, turn, out_of_budget, score)");
    if (!episode_) return tool_request_refused(*op + ": no episode: send start first");
    if (*op == "complete" || *op == "turn") {
      const std::string* text = tool_request_text(req, "text");
      if (!text) return tool_request_refused(*op + ": `text` must be the turn's text");
      if (*op == "complete") return {{"ok", true}, {"complete", WorkspaceEpisode::turn_complete(*text)}};
      if (episode_->done()) return tool_request_refused("turn: the episode is over (" + std::string(to_string(episode_->end())) + ")");
      const TurnOutcome t = episode_->take_turn(*text, *sandbox_);
      json out = {{"ok", true}, {"kept", t.kept}, {"observation", t.observation}, {"done", t.done}};
      out.update(episode_stats_json(*episode_));
      return out;
    }
    if (*op == "out_of_budget") {
      episode_->out_of_budget();
      json out = {{"ok", true}};
      out.update(episode_stats_json(*episode_));
      return out;
    }
    // score: a machinery failure during the episode is not scored either.
    json out = {{"ok", true}};
    out.update(episode_stats_json(*episode_));
    if (episode_->failure() != InfraFailure::none) {
      out["failure"] = to_string(episode_->failure());
      out["reason"] = "the sandbox failed during the episode: not scored";
      return out;
    }
    const auto& task = episode_->task();
    const WorkspaceScore s = score_workspace(*sandbox_, task, episode_->files().changed_from(task.workspace));
    out["failure"] = to_string(s.failure);
    out["reason"] = s.reason;
    if (s.failure == InfraFailure::none) {
      out["reward"] = s.reward;
      out["solved"] = s.solved;
      out["ignored"] = s.ignored;
    }
    return out;
  }();
  if (!reply.value("ok", false)) ++bad_requests_;
  // Text that is not UTF-8 (a policy's bytes) is replaced, never a throw.
  return reply.dump(-1, ' ', false, json::error_handler_t::replace);
}

int serve_workspace_tools(WorkspaceToolService& service) {
  std::string line;  // held to kMaxToolRequestBytes + 1: answer() refuses it
  for (int c; (c = std::getc(stdin)) != EOF;) {
    if (c != '\n') {
      if (line.size() <= kMaxToolRequestBytes) line.push_back(static_cast<char>(c));
      continue;
    }
    const std::string reply = service.answer(line);
    std::fwrite(reply.data(), 1, reply.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    line.clear();
  }
  return 0;
}

}  // namespace rlx
