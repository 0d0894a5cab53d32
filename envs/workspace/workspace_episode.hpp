// One agent episode on a workspace task (envs/workspace): the context the
// policy starts from, its turns (each up to its first complete tool call,
// agent_tools.hpp), the observations they return, and how it ends: at
// @submit, at the turn limit, when the explorer's token budget runs out,
// or when the sandbox's machinery fails (then it is not scored). The
// explorer owns the tokens; this owns the text and the private copy of the
// workspace. Also the expert's transcript for a task, which the supervised
// start trains on. CAF-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envs/workspace/agent_tools.hpp"
#include "envs/workspace/workspace_files.hpp"
#include "envs/workspace/workspace_task.hpp"

namespace rlx {

enum class EpisodeEnd : std::uint8_t {
  running,
  submitted,   // the agent called @submit
  turn_limit,  // EpisodeLimits::max_turns turns without a submit
  budget,      // the explorer's token budget ran out
  machinery,   // the sandbox failed during @run: not scored (docs/failures.md)
};
const char* to_string(EpisodeEnd e);

struct EpisodeLimits {
  int max_turns = 12;
};

struct EpisodeStats {
  int turns = 0;
  int tool_calls = 0;  // calls that ran
  int bad_calls = 0;   // turns whose call could not run (said in their observation)
  int runs = 0;        // @run calls
  // Calls that ran on a file holding a hole (@read, @replace or @write of
  // the module the README names): the task's names were copied, not made up.
  int hole_file_calls = 0;
};

// What a turn leaves: how much of the policy's text belongs to the turn
// (the rest, decoded past the call, is dropped), the observation to append
// as context, and whether the episode is over.
struct TurnOutcome {
  std::size_t kept = 0;
  std::string observation;
  bool done = false;
};

// The observation as it enters the context: "[out]\n" ... "[end]\n".
std::string framed_observation(const std::string& text);

// The context an episode on `task` starts from (WorkspaceEpisode::prompt()).
std::string episode_prompt(const WorkspaceTask& task);

// A task's family for reports: its split and template ("held_out/t6").
std::string task_family(const WorkspaceTask& task);

class WorkspaceEpisode {
 public:
  WorkspaceEpisode(WorkspaceTask task, EpisodeLimits limits = {}, ToolBudget budget = {}, WorkspaceLimits files = {});

  // The context before the first turn: the tools in one line each and the README.
  const std::string& prompt() const { return prompt_; }
  // Whether the turn so far holds its call (the decoder stops there).
  static bool turn_complete(std::string_view text) { return parse_turn(text, false).state != ParsedTurn::State::incomplete; }
  // Ends the turn `text` (complete, or cut short: the policy ended its
  // text or the turn its budget; then the call is bad) and runs its call on
  // the private copy. Called after done(): nothing happens.
  TurnOutcome take_turn(std::string_view text, const Sandbox& sandbox);
  // The token budget ran out: the episode ends unsubmitted (it is still scored).
  void out_of_budget();

  bool done() const { return end_ != EpisodeEnd::running; }
  EpisodeEnd end() const { return end_; }
  InfraFailure failure() const { return failure_; }
  const EpisodeStats& stats() const { return stats_; }
  // Holes whose function's body in the episode's copy is no longer the
  // workspace's (rewritten, rightly or not): an edit got in where it had
  // to, whatever it wrote.
  int holes_rewritten() const;
  const WorkspaceTask& task() const { return task_; }
  const WorkspaceFiles& files() const { return files_; }
  // The reward request's payload: the changed files (encode_changes).
  std::string payload() const;
  // The episode after its prompt: each turn as kept, each observation
  // (what the policy saw), for a log.
  const std::string& transcript() const { return transcript_; }

 private:
  bool on_hole_file(const ToolCall& call) const;

  WorkspaceTask task_;
  EpisodeLimits limits_;
  ToolBudget budget_;
  WorkspaceFiles files_;
  std::string prompt_;
  std::string transcript_;
  EpisodeEnd end_ = EpisodeEnd::running;
  InfraFailure failure_ = InfraFailure::none;
  EpisodeStats stats_;
};

// The turns an expert takes on `task`: run the tests, read each module
// with a hole, replace each removed body with the reference's (by the function's name: @replace PATH NAME), run the
// tests again, submit. Played through a WorkspaceEpisode they score 1.
std::vector<std::string> expert_turns(const WorkspaceTask& task);

// The expert's episode on `task` as the policy would see it: the prompt,
// then its turns with the observation after each (none after the last:
// the episode ended there). What `rlx sft` trains on, the turns as
// targets and the rest as context.
struct Transcript {
  std::string prompt;
  std::vector<std::string> parts;  // turn, observation, turn, ..., turn
  // Indices of turns (even parts) that are mistakes: played, refused and
  // kept as context, never targets (recovery_drill).
  std::vector<std::size_t> mistaken;
  EpisodeEnd end = EpisodeEnd::running;
  InfraFailure failure = InfraFailure::none;  // a @run the sandbox failed: not a transcript to train on

  // Whether part `i` is a target to train on: a turn not mistaken.
  bool target(std::size_t i) const;
};
Transcript expert_transcript(const WorkspaceTask& task, const Sandbox& sandbox, EpisodeLimits limits = {},
                             ToolBudget budget = {});

// The expert's drill on a one-hole task (single_hole_task): the prompt,
// the read of the hole's module (`focused`: of the hole's function alone,
// from its def line to its raise) and its fix, nothing run (no sandbox
// call), so a supervised start can train on every function of a project
// for the price of a read. Parts as in Transcript: read, observation, fix;
// `end` stays running (nothing is submitted: the fix ends the drill unplayed).
Transcript expert_drill(const WorkspaceTask& task, const Sandbox& sandbox, bool focused = false, ToolBudget budget = {});

// The mistakes a recovery drill starts from: those a policy was seen
// making and never recovering from (docs/workspace.md).
enum class Mistake : std::uint8_t {
  wrong_path,  // a read of the hole's module with its name cut short ("pkg/librar.py"), before the read
  wrong_name,  // the fix under the function's name cut short, before the fix
  no_name,     // the fix's header without the name, then its lines and @end as a turn of their own
};
constexpr int kMistakes = 3;

// The expert's drill with `mistake` played first and refused (`cut`
// characters, 1-3, cut from the name), then the read and the fix as in
// expert_drill (focused, but a whole read after a wrong path). The
// mistaken turns are context (Transcript::mistaken), the read and the fix
// targets: the drill teaches the recovery, not the mistake. Nullopt when
// the cut name is a real one (nothing refused).
std::optional<Transcript> recovery_drill(const WorkspaceTask& task, const Sandbox& sandbox, Mistake mistake, int cut,
                                         ToolBudget budget = {});

}  // namespace rlx
