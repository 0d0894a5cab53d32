#include "envs/code/sandbox.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/child_process.hpp"

namespace rlx {

namespace fs = std::filesystem;

namespace {


// A private directory holding the program, removed when done.
struct ProgramDir {
  fs::path path;
  ~ProgramDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() { close_both(); }
  bool open() { return pipe2(fd, O_CLOEXEC) == 0; }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  void close_both() {
    close_end(0);
    close_end(1);
  }
};

void set_limit(int resource, rlim_t soft, rlim_t hard) {
  const rlimit l{soft, hard};
  setrlimit(resource, &l);  // in the child, before exec: a failure leaves the inherited limit
}

// Processes (threads count too) the real user `uid` runs now, from /proc.
std::uint64_t processes_of(uid_t uid) {
  std::uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    struct stat st {};
    if (stat(e.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
    std::error_code tec;
    for (const auto& task : fs::directory_iterator(e.path() / "task", tec)) {
      (void)task;
      ++n;
    }
  }
  return n;
}

// CPU time and run-queue wait (seconds) of process `root` and all its
// descendants now, from /proc/PID/task/TID/schedstat ({0, 0} where the
// kernel keeps no schedstat). Read before a timed-out run is killed.
std::pair<double, double> tree_schedstat(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto paren = line.rfind(')');  // the command may hold spaces and parentheses
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid) children[ppid].push_back(static_cast<pid_t>(std::stol(name)));
  }
  double cpu = 0, waited = 0;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (const auto& task : fs::directory_iterator(fs::path("/proc") / std::to_string(p) / "task", ec)) {
      std::ifstream in(task.path() / "schedstat");
      double run_ns = 0, wait_ns = 0;
      if (in >> run_ns >> wait_ns) cpu += run_ns * 1e-9, waited += wait_ns * 1e-9;
    }
    if (auto c = children.find(p); c != children.end()) todo.insert(todo.end(), c->second.begin(), c->second.end());
  }
  return {cpu, waited};
}

// Python's first lines in the sandbox, before the program's: one byte on
// fd 3 says the machinery worked (bwrap set the sandbox up, the interpreter
// started); the program then runs as __main__ under its own file name.
std::string launcher(const std::string& program_path) {
  return "import os\nos.write(3, b'\\x01')\nos.close(3)\ndel os\n__file__ = '" + program_path +
         "'\nexec(compile(open(__file__, 'rb').read(), __file__, 'exec'))\n";
}

// What the child needs, all of it built before it exists.
struct ChildSetup {
  int in, out, err, mark;
  rlim_t cpu, bytes, file, nproc;
  bool root;
  uid_t uid;
  char* const* argv;
  sigset_t mask;  // the parent thread's, restored before exec
};

// The child of vfork: it runs in this process's memory, on the stack of
// the thread that called vfork (suspended until the exec), so it makes
// system calls only, never returns, and changes its ids with raw system
// calls (glibc's setuid/setgid/setgroups would signal every thread of the
// process to change theirs too).
[[noreturn]] void start_child(const ChildSetup& s) {
  // The child has its own table of handlers: those of this process would
  // run on its memory, so they go back to the default (ignored stay so).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
    sa = {};
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, nullptr);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(s.in, 0);
  dup2(s.out, 1);
  dup2(s.err, 2);
  if (s.mark == 3) fcntl(3, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
  else dup2(s.mark, 3);
  set_limit(RLIMIT_CPU, s.cpu, s.cpu + 1);
  set_limit(RLIMIT_AS, s.bytes, s.bytes);
  set_limit(RLIMIT_FSIZE, s.file, s.file);
  set_limit(RLIMIT_NOFILE, 64, 64);
  set_limit(RLIMIT_CORE, 0, 0);
  if (s.root) {  // root is exempt from RLIMIT_NPROC: run as the fresh uid
    syscall(SYS_setgroups, 0, nullptr);  // refused in some user namespaces; the ids below are what counts
    if (syscall(SYS_setgid, s.uid) != 0 || syscall(SYS_setuid, s.uid) != 0) _exit(126);
  }
  set_limit(RLIMIT_NPROC, s.nproc, s.nproc);
  pthread_sigmask(SIG_SETMASK, &s.mask, nullptr);
  execv(s.argv[0], s.argv);
  _exit(127);
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::string SandboxRun::reason() const {
  switch (end) {
    case End::exited:
      return exit_code == 0 ? "" : fmt::format("exited with code {}", exit_code);
    case End::timed_out:
      return fmt::format("timed out after {:.1f} s (wall clock): killed", wall_s);
    case End::cpu_limit:
      return "used up its CPU time: killed";
    case End::output_limit:
      return "wrote more output than allowed: killed";
    case End::signalled:
      return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    case End::not_started:
      return "could not start: " + err;
    case End::setup_failed:
      return fmt::format("the sandbox failed before the program ran (exit code {})", exit_code);
    case End::starved:
      return fmt::format("timed out after {:.1f} s while waiting {:.1f} s for a CPU and running {:.1f} s: an overloaded "
                         "machine",
                         wall_s, waited_s, cpu_s);
  }
  return "";
}

Result<Sandbox> Sandbox::open(const SandboxOptions& options) {
  for (const auto& exe : {options.bwrap, options.python})
    if (access(exe.c_str(), X_OK) != 0)
      return make_error(Errc::not_found, exe + " is not there or not executable (Debian: apt-get install bubblewrap python3)");
  Sandbox box(options);
  const SandboxRun probe = box.run("print(6 * 7)\n", "");
  if (!probe.ok() || probe.out != "42\n")
    return make_error(Errc::io, "bubblewrap cannot run a program on this machine (" +
                                    (probe.ok() ? "wrong output" : probe.reason()) + "): " +
                                    probe.err.substr(0, 300));
  return box;
}

SandboxRun Sandbox::run(const std::string& program, const std::string& input) const {
  return execute(program, input, true);
}

SandboxRun Sandbox::run_in(const std::string& work_dir, const std::string& program, const std::string& input) const {
  if (work_dir.empty() || work_dir[0] != '/' || !fs::is_directory(work_dir)) {
    SandboxRun r;
    r.err = "no such project directory: " + work_dir;
    return r;
  }
  return execute(program, input, true, work_dir);
}

SandboxRun Sandbox::run_unsandboxed(const std::string& program, const std::string& input) const {
  return execute(program, input, false);
}

SandboxRun Sandbox::execute(const std::string& program, const std::string& input, bool sandboxed,
                            const std::string& work_dir) const {
  ignore_sigpipe();  // a program that exits before reading its input must not end this process
  SandboxRun r;
  const SandboxLimits& lim = options_.limits;
  const auto started = std::chrono::steady_clock::now();
  ProgramDir dir;
  {
    char tmpl[] = "/tmp/rlx-sandbox-XXXXXX";
    if (!mkdtemp(tmpl)) {
      r.err = std::string("mkdtemp: ") + std::strerror(errno);
      return r;
    }
    dir.path = tmpl;
    chmod(tmpl, 0755);  // the sandbox user reads the program through it
    std::ofstream out(dir.path / "program.py", std::ios::binary);
    out << program;
    if (!out) {
      r.err = "cannot write the program";
      return r;
    }
  }
  const std::string tmp_bytes = std::to_string(lim.file_mb << 20);
  std::vector<std::string> args;
  if (sandboxed) {
    args = {options_.bwrap, "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
            "--size", tmp_bytes, "--tmpfs", "/tmp", "--ro-bind", dir.path.string(), "/sandbox"};
    if (!work_dir.empty()) args.insert(args.end(), {"--ro-bind", work_dir, "/work"});
    args.insert(args.end(), {"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
                             "--setenv", "LANG", "C.UTF-8", "--chdir", work_dir.empty() ? "/tmp" : "/work", "--",
                             options_.python, "-I", "-B", "-c", launcher("/sandbox/program.py")});
  } else {
    args = {options_.python, "-I", "-c", launcher((dir.path / "program.py").string())};
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Pipe in, out, err, mark;
  if (!in.open() || !out.open() || !err.open() || !mark.open()) {
    r.err = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  const bool root = geteuid() == 0;
  // As root, each run gets a uid of its own that owns nothing on the host:
  // RLIMIT_NPROC then bounds this run alone (a fork bomb cannot starve
  // other sandboxes), and runs cannot signal each other.
  const auto uid = static_cast<uid_t>(100000 + std::random_device{}() % 1'000'000'000u);
  // Not root: the program runs as this user, whose processes all count
  // against RLIMIT_NPROC; it may start `processes` more than run now.
  const auto nproc = static_cast<rlim_t>(root ? lim.processes : processes_of(getuid()) + lim.processes);
  const auto cpu = static_cast<rlim_t>(std::max(1.0, std::ceil(lim.cpu_s)));
  const auto bytes = static_cast<rlim_t>(lim.memory_mb << 20);
  const auto file = static_cast<rlim_t>(lim.file_mb << 20);
  ChildSetup setup{in.fd[0], out.fd[1], err.fd[1], mark.fd[1], cpu, bytes, file, nproc, root, uid, argv.data(), {}};
  // Signals stay blocked from before vfork until the child has reset its
  // handlers: no handler of this process runs in the child.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &setup.mask);
  const pid_t pid = options_.copy_on_fork ? fork() : vfork();
  if (pid == 0) start_child(setup);
  const int spawn_errno = errno;
  pthread_sigmask(SIG_SETMASK, &setup.mask, nullptr);
  if (pid < 0) {
    r.err = std::string("fork: ") + std::strerror(spawn_errno);
    return r;
  }
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  mark.close_end(1);
  for (int fd : {in.fd[1], out.fd[0], err.fd[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (input.empty()) in.close_end(1);

  std::size_t written = 0;
  bool killed = false;
  auto kill_it = [&](SandboxRun::End why) {
    if (killed) return;
    killed = true;
    r.end = why;
    if (why == SandboxRun::End::timed_out) std::tie(r.cpu_s, r.waited_s) = tree_schedstat(pid);
    kill(pid, SIGKILL);  // bwrap: its namespace dies with it (--die-with-parent)
  };
  char buf[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    const double left = lim.wall_s - since(started);
    if (left <= 0) kill_it(SandboxRun::End::timed_out);
    if (killed) break;
    std::vector<pollfd> fds;
    if (out.fd[0] >= 0) fds.push_back({out.fd[0], POLLIN, 0});
    if (err.fd[0] >= 0) fds.push_back({err.fd[0], POLLIN, 0});
    if (in.fd[1] >= 0) fds.push_back({in.fd[1], POLLOUT, 0});
    if (poll(fds.data(), fds.size(), static_cast<int>(std::ceil(left * 1000))) < 0 && errno != EINTR) break;
    for (const auto& p : fds) {
      if (!p.revents) continue;
      if (p.fd == in.fd[1]) {
        const ssize_t n = write(p.fd, input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<std::size_t>(n);
        if (n < 0 && errno != EAGAIN) written = input.size();  // it closed its stdin: fine
        if (written == input.size()) in.close_end(1);
        continue;
      }
      const bool is_out = p.fd == out.fd[0];
      std::string& into = is_out ? r.out : r.err;
      const ssize_t n = read(p.fd, buf, sizeof buf);
      if (n > 0) {
        into.append(buf, static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(n),
                                                                         lim.output_bytes - std::min<std::uint64_t>(into.size(), lim.output_bytes))));
        if (into.size() >= lim.output_bytes) kill_it(SandboxRun::End::output_limit);
      } else if (n == 0 || errno != EAGAIN) {
        (is_out ? out : err).close_end(0);
      }
    }
  }
  // Its pipes are closed, but it may live on (a program that closes its
  // output and sleeps): the wall clock bounds this wait too (a pidfd
  // polled until the deadline; without one, waitpid polled every ms).
  int status = 0;
  if (!killed) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      const double left = lim.wall_s - since(started);
      if (left <= 0 || poll(&p, 1, static_cast<int>(std::ceil(left * 1000))) == 0) kill_it(SandboxRun::End::timed_out);
      ::close(pidfd);
    } else {
      while (!killed && waitpid(pid, &status, WNOHANG) == 0) {
        if (since(started) >= lim.wall_s) kill_it(SandboxRun::End::timed_out);
        else ::usleep(1000);
      }
    }
  }
  waitpid(pid, &status, 0);  // ended, or SIGKILLed: it ends now
  r.wall_s = since(started);
  char byte = 0;
  fcntl(mark.fd[0], F_SETFL, fcntl(mark.fd[0], F_GETFL) | O_NONBLOCK);
  const bool program_ran = read(mark.fd[0], &byte, 1) == 1;
  if (killed) {
    // Killed at the wall clock having waited for a CPU more than it ran and
    // for at least half the wall clock, with less than its CPU budget used
    // in all (a program that starves itself with busy processes uses far
    // more; one that sleeps or blocks waits for no CPU): the machine was
    // overloaded, not the program slow.
    if (r.end == SandboxRun::End::timed_out && r.waited_s > r.cpu_s && r.waited_s >= 0.5 * lim.wall_s &&
        r.cpu_s < lim.cpu_s)
      r.end = SandboxRun::End::starved;
    if (!program_ran && r.end == SandboxRun::End::timed_out) r.end = SandboxRun::End::setup_failed;
    return r;
  }
  if (WIFEXITED(status)) {
    r.end = SandboxRun::End::exited;
    r.exit_code = WEXITSTATUS(status);
    // bwrap passes on its child's end: 128 + the signal that killed it.
    if (sandboxed && r.exit_code > 128 && r.exit_code < 128 + 65) {
      r.signal = r.exit_code - 128;
      r.end = SandboxRun::End::signalled;
    }
  } else if (WIFSIGNALED(status)) {
    r.end = SandboxRun::End::signalled;
    r.signal = WTERMSIG(status);
  }
  if (r.end == SandboxRun::End::signalled && (r.signal == SIGXCPU || (r.signal == SIGKILL && r.wall_s >= lim.cpu_s)))
    r.end = SandboxRun::End::cpu_limit;
  // Ended before the launcher's first line: bwrap's own setup (its exit
  // code 1 is also a Python exception's, so the code cannot tell) or the
  // interpreter failed.
  if (!program_ran) r.end = SandboxRun::End::setup_failed;
  return r;
}

}  // namespace rlx
