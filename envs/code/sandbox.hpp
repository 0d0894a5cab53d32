// Runs an untrusted Python program (model-written code) inside bubblewrap:
// no network (a fresh network namespace), its own pid, ipc, uts and user
// namespaces, a read-only /usr and nothing else of the host's file system
// (no /etc, no /home, no /root), a private size-limited /tmp, the program
// itself read-only, a clean environment; CPU time, address space, open
// files, file size and (run as root: the program runs as a fresh uid of
// its own, which owns nothing) process count limited by setrlimit, stdout+stderr capped, and a
// wall-clock timeout after which the whole namespace is killed. What it
// cannot do and what it is told is tested in tests/envs/sandbox_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace rlx {

struct SandboxLimits {
  double cpu_s = 2.0;                  // RLIMIT_CPU
  double wall_s = 5.0;                 // killed after this long
  std::uint64_t memory_mb = 512;       // RLIMIT_AS (bwrap and Python included)
  std::uint64_t processes = 32;        // RLIMIT_NPROC: as root, of the run's own uid; else this many more than the user runs
  std::uint64_t output_bytes = 1 << 16;  // stdout and stderr each; more ends the run
  std::uint64_t file_mb = 16;          // RLIMIT_FSIZE and the size of the private /tmp
};

struct SandboxOptions {
  std::string bwrap = "/usr/bin/bwrap";
  std::string python = "/usr/bin/python3";
  SandboxLimits limits;
  // How the run's process starts. vfork (the default) costs the same
  // whatever this process's size; fork copies its page tables and makes
  // its memory copy-on-write for each run, which in a learner's process
  // of 1.5 GB took half of a 2-core machine (docs/sandbox.md). fork is
  // kept for the benchmark's baseline.
  bool copy_on_fork = false;
};

struct SandboxRun {
  enum class End {
    exited,          // the program ended by itself (exit_code says how)
    timed_out,       // wall-clock timeout: killed
    cpu_limit,       // RLIMIT_CPU: killed by SIGXCPU/SIGKILL
    output_limit,    // wrote more than output_bytes: killed
    signalled,       // died of another signal
    // Failures of the machinery, not of the program (its outcome is unknown):
    not_started,     // the run could not be set up: temp dir, pipe, fork/vfork (the reason is in err)
    setup_failed,    // bwrap or the interpreter failed before the program's first line ran
    starved,         // wall-clock timeout while the program waited for a CPU more than it ran (an overloaded machine)
  };
  End end = End::not_started;
  int exit_code = -1;
  int signal = 0;
  std::string out, err;                // what it wrote (each capped at output_bytes)
  double wall_s = 0;
  // A timed-out run's processes: CPU time used and time spent runnable,
  // waiting for a CPU (/proc/PID/schedstat; both 0 where it is missing).
  double cpu_s = 0, waited_s = 0;
  bool ok() const { return end == End::exited && exit_code == 0; }
  // The machinery failed: the program's own behaviour decided nothing.
  bool machinery_failed() const { return end == End::not_started || end == End::setup_failed || end == End::starved; }
  // One line: why it did not end cleanly ("" when ok()).
  std::string reason() const;
};

class Sandbox {
 public:
  // Checks that bwrap and the interpreter exist and that a trivial program
  // runs inside (namespaces allowed on this machine); else a clear error.
  static Result<Sandbox> open(const SandboxOptions& options = {});

  // Runs `program` (Python source) with `input` on its stdin.
  SandboxRun run(const std::string& program, const std::string& input) const;

  // The same in a project: `work_dir` (a host directory the sandbox's uid
  // can read) is bound read-only at /work, the program's working
  // directory. Nothing it runs can change the project: writes go to the
  // private /tmp, which is bounded by file_mb and gone with the run.
  SandboxRun run_in(const std::string& work_dir, const std::string& program, const std::string& input) const;

  // The same program with the same limits but without bubblewrap (for the
  // benchmark's baseline; never for untrusted code).
  SandboxRun run_unsandboxed(const std::string& program, const std::string& input) const;

  const SandboxOptions& options() const { return options_; }

 private:
  explicit Sandbox(SandboxOptions options) : options_(std::move(options)) {}
  SandboxRun execute(const std::string& program, const std::string& input, bool sandboxed,
                     const std::string& work_dir = "") const;
  SandboxOptions options_;
};

}  // namespace rlx
