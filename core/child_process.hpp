// Child processes RLX starts (learner ranks, member nodes): started with
// fork+exec so they can die with their parent (PR_SET_PDEATHSIG) and leave
// the terminal's Ctrl-C to it (the parent drains and stops them), and
// reaped with a grace period, then killed: no orphans, no zombies.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace rlx {

struct ChildOptions {
  std::vector<std::string> env;      // "KEY=VALUE" added to the child's environment
  bool own_process_group = true;     // the terminal's SIGINT reaches only the parent
  int parent_death_signal = 9;       // sent to the child when the parent dies (0: none)
};

// Starts argv[0] (a path) with `argv`. Fails if fork fails.
Result<pid_t> spawn_child(const std::vector<std::string>& argv, const ChildOptions& options = {});

struct Reaped {
  pid_t pid = 0;
  bool clean = false;                // exited with code 0 within the grace period
  std::string how;                   // "exit code 3", "signal 9", "killed after the grace period"
};

// Makes a write to a pipe whose reader has gone fail with EPIPE instead of
// ending this process (SIGPIPE's default action, silent): whoever feeds a
// child's stdin calls it first. Process-wide and idempotent.
void ignore_sigpipe();

// Waits up to `grace` for all of `pids`, then SIGTERMs the rest, waits up
// to one more second, and SIGKILLs what is left. Every child is reaped.
std::vector<Reaped> reap_children(const std::vector<pid_t>& pids, std::chrono::milliseconds grace);

}  // namespace rlx
