// `rlx replay`, `rlx inspect` and `rlx plot`: the command-line side of
// rollout_log/ (argument handling, progress, exit codes). docs/replay.md.
#pragma once

#include <string>

namespace rlx {

struct ReplayArgs {
  std::string log;           // a log_dir or its rollouts/ directory
  std::string config;        // empty: the config recorded in the log
  std::string mode = "exact";// exact | offline
  bool skip_bad = false;
  int passes = 4;            // offline
  int eval_episodes = 32;    // offline: greedy episodes to score the result
};
// 0: done (exact: every version identical); 1: exact replay diverged;
// 2: bad arguments, config or a damaged log.
int replay_command(const ReplayArgs& args);

struct InspectArgs {
  std::string log;
  bool json = false;
  std::string plot;          // PNG path, or empty
  bool skip_bad = false;
};
// 0, or 2 for a damaged log (without --skip-bad) or bad arguments.
int inspect_command(const InspectArgs& args);

// Draws <log_dir>/metrics.jsonl into `out` (default <log_dir>/metrics.png).
int plot_command(const std::string& log_dir, const std::string& out);

}  // namespace rlx
