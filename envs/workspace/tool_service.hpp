// Workspace episodes for an agent harness outside RLX (docs/gateway.md,
// "Workspace tasks from a harness"): `rlx workspace-tools` answers JSON
// lines on stdin/stdout with this. The harness samples the policy's turns
// through the gateway; this runs each turn's tool call on the episode's
// private copy in the sandbox (the same WorkspaceEpisode the explorers
// play in-process) and, at the end, scores it with the hidden tests in the
// same sandbox command the reward pool uses (score_workspace). The harness
// never sees a hidden test or the solution: only the prompt, the
// observations and the score. CAF-free.
//
// One request per line, one reply per line, in order:
//   {"op":"start","task":"train:12:1"}   a new episode (ends any before it)
//       -> {"ok":true,"task":..,"family":..,"prompt":..,"max_turns":..}
//   {"op":"complete","text":T}           does the turn so far hold its call?
//       -> {"ok":true,"complete":bool}
//   {"op":"turn","text":T}               the turn ends: run its call
//       -> {"ok":true,"kept":BYTES,"observation":..,"done":bool,"end":..}
//   {"op":"out_of_budget"}               the harness's token budget ran out
//   {"op":"score"}                       the hidden tests decide
//       -> {"ok":true,"reward":R,"solved":..,"reason":..,"failure":"none",..}
//          or, when the machinery failed, "failure":"sandbox_setup" (etc.)
//          and no reward: the session is to be closed as a failure.
// A line that is no request gets {"ok":false,"error":..} and is counted;
// the service goes on.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "envs/code/sandbox.hpp"
#include "envs/workspace/workspace_episode.hpp"

namespace rlx {

class WorkspaceToolService {
 public:
  WorkspaceToolService(const Sandbox& sandbox, EpisodeLimits limits = {}, ToolBudget budget = {});

  // The reply to one request line (without its newline).
  std::string answer(std::string_view line);

  std::size_t requests() const { return requests_; }
  std::size_t bad_requests() const { return bad_requests_; }

 private:
  const Sandbox* sandbox_;
  EpisodeLimits limits_;
  ToolBudget budget_;
  std::optional<WorkspaceEpisode> episode_;
  std::size_t requests_ = 0, bad_requests_ = 0;
};

// `rlx workspace-tools`: serves `service` on stdin/stdout until end of
// input; returns the exit code.
int serve_workspace_tools(WorkspaceToolService& service);

}  // namespace rlx
