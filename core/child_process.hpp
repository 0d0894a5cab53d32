// Child processes RLX starts (learner ranks, member nodes, external envs): started with
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
  int stdin_fd = -1;                 // the child's stdin (-1: this process's)
  int stdout_fd = -1;                // the child's stdout (-1: this process's)
  std::string cwd;                   // the child's working directory ("": this process's)
  bool search_path = false;          // argv[0] may be a bare name, looked up in PATH
};

// Starts argv[0] with `argv`. Fails (io, with the reason) when fork fails
// or the program cannot be executed (missing, not executable, a cwd that
// does not exist): the child reports exec's error before it exits.
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
