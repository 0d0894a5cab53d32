#include "core/child_process.hpp"

#include <algorithm>
#include <mutex>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlx {

void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

Result<pid_t> spawn_child(const std::vector<std::string>& args, const ChildOptions& options) {
  // Everything the child needs is built before fork: in a multi-threaded
  // parent the child may only make async-signal-safe calls (no malloc).
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    const bool replaced = std::any_of(options.env.begin(), options.env.end(),
                                      [&](const std::string& o) { return o.substr(0, o.find('=')) == key; });
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  // exec's error comes back through this pipe; closed by a successful exec.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return make_error(Errc::io, std::string("cannot start ") + args.at(0) + ": pipe: " + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(report[0]);
    close(report[1]);
    return make_error(Errc::io, std::string("cannot start ") + args.at(0) + ": " + std::strerror(e));
  }
  if (pid == 0) {
    close(report[0]);
    if (options.parent_death_signal) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) _exit(1);
    }
    if (options.own_process_group) setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (options.stdin_fd >= 0 && dup2(options.stdin_fd, STDIN_FILENO) < 0) _exit(127);
    if (options.stdout_fd >= 0 && dup2(options.stdout_fd, STDOUT_FILENO) < 0) _exit(127);
    if (options.cwd.empty() || chdir(options.cwd.c_str()) == 0) {
      if (options.search_path)
        execvpe(argv[0], argv.data(), envp.data());
      else
        execve(argv[0], argv.data(), envp.data());
    }
    const int e = errno;
    [[maybe_unused]] auto n = write(report[1], &e, sizeof e);
    _exit(127);
  }
  close(report[1]);
  int e = 0;
  ssize_t got;
  do got = read(report[0], &e, sizeof e);
  while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof e)) {
    waitpid(pid, nullptr, 0);
    return make_error(Errc::io, std::string("cannot start ") + args.at(0) +
                                    (options.cwd.empty() ? "" : " in " + options.cwd) + ": " + std::strerror(e));
  }
  return pid;
}

namespace {

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Waits for `pid` until `deadline`; true when it was reaped.
bool wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline, int& status) {
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a child's exit, bounded by the deadline
  }
}

}  // namespace

std::vector<Reaped> reap_children(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  std::vector<Reaped> out;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t pid : pids) {
    Reaped r{pid, false, ""};
    int status = 0;
    if (wait_until(pid, deadline, status)) {
      r.clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      r.how = describe(status);
    } else {
      kill(pid, SIGTERM);
      if (!wait_until(pid, std::chrono::steady_clock::now() + std::chrono::seconds(1), status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      r.how = "stopped after the grace period (" + describe(status) + ")";
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace rlx
