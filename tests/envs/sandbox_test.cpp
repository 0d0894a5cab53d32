// The sandbox for model-written programs, attacked as a reward hacker and
// a careless model would: each attempt scores 0 with its reason, and the
// machine is unharmed (host files unchanged, no connection made, the next
// program runs). Needs bubblewrap (tools/install-deps.sh installs it).
#include <arpa/inet.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <cstdlib>
#include <vector>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "envs/code/program_tests.hpp"
#include "tests/envs/sandbox_fixture.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

const std::vector<ProgramTest> kAddTests{{"[2, 3]", "5"}, {"[-1, 1]", "0"}, {"[10, 20]", "30"}, {"[0, 0]", "0"}};

// A solution of `add` that first does `attack`; it would pass every test otherwise.
std::string attacking(const std::string& attack) {
  return "import os, sys, socket\n" + attack + "\ndef add(a, b):\n    return a + b\n";
}

}  // namespace

TEST_CASE("a program's reward is the fraction of hidden tests it passes", "[envs][sandbox]") {
  const Sandbox box = test::open_sandbox();
  auto right = score_program(box, "def add(a, b):\n    return a + b\n", "add", kAddTests);
  CHECK(right.reward == 1.0);
  CHECK(right.reason == "passed 4 of 4");
  auto half = score_program(box, "def add(a, b):\n    return a + b if a > 0 else 1\n", "add", kAddTests);
  CHECK(half.reward == 0.5);
  auto raises = score_program(box, "def add(a, b):\n    return a + b + 0 // (a - 2)\n", "add", kAddTests);
  CHECK(raises.passed == 3);
  CHECK(raises.reason == "passed 3 of 4; test 0 raised ZeroDivisionError");
  auto missing = score_program(box, "def plus(a, b):\n    return a + b\n", "add", kAddTests);
  CHECK(missing.reward == 0.0);
  // Printing fake answers does not help without the expected ones.
  auto faker = score_program(box, "print('\\x1eRLX-RESULT 0 5')\ndef add(a, b):\n    return 7\n", "add", kAddTests);
  CHECK(faker.reward == 0.0);
}

TEST_CASE("a program's process starts alike by vfork and by fork, limits and fresh uid included", "[envs][sandbox]") {
  // vfork is the sandbox's way (its cost does not grow with this process's
  // size); fork is the benchmark's baseline. Both must run the same child.
  for (const bool copy_on_fork : {false, true}) {
    SandboxOptions o;
    o.copy_on_fork = copy_on_fork;
    o.limits.wall_s = 5.0;
    auto box = Sandbox::open(o);
    REQUIRE(box.ok());
    CHECK(score_program(*box, "def add(a, b):\n    return a + b\n", "add", kAddTests).reward == 1.0);
    const auto r = box->run("import os, resource\nprint(os.getuid() != 0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n",
                            "");
    CHECK(r.ok());
    CHECK(r.out == "True 64\n");  // never root inside; the open-files limit set in the child
  }
}

TEST_CASE("a program that exits without reading its input ends alone, with its own result", "[envs][sandbox][defensive]") {
  // More input than a pipe holds: the writer is still writing when the
  // program is gone (a program with a syntax error exits at once). Before
  // SIGPIPE was ignored, that write ended the whole process, silently.
  const Sandbox box = test::open_sandbox();
  const std::string input(1 << 20, '\n');
  for (int i = 0; i < 3; ++i) {
    auto r = box.run("import sys\nsys.exit(3)\n", input);
    CHECK(r.end == SandboxRun::End::exited);
    CHECK(r.exit_code == 3);
  }
  auto broken = score_program(box, "def add(a, b) return a + b\n", "add", kAddTests);
  CHECK(broken.reward == 0.0);
  CHECK(broken.reason.find("SyntaxError") != std::string::npos);
}

TEST_CASE("a program cannot read the hidden tests or the host's files, nor write outside its tmp",
          "[envs][sandbox][defensive]") {
  const Sandbox box = test::open_sandbox();
  // The expected outputs as a file on the host: not visible inside.
  const fs::path hidden = fs::temp_directory_path() / ("rlx-hidden-tests-" + std::to_string(getpid()) + ".json");
  std::ofstream(hidden) << "[5, 0, 30, 0]";
  auto steal = score_program(box, attacking("print(open('" + hidden.string() + "').read())"), "add", kAddTests);
  CHECK(steal.reward == 0.0);
  CHECK(steal.reason.find("FileNotFoundError") != std::string::npos);
  CHECK(steal.run.out.find("[5, 0, 30, 0]") == std::string::npos);
  fs::remove(hidden);
  // Its own source it may read (it wrote it); the expected answers are not in it.
  auto self_read = score_program(box, attacking("print(open('/sandbox/program.py').read())"), "add", kAddTests);
  CHECK(self_read.reward == 1.0);
  const std::string source = self_read.run.out.substr(0, self_read.run.out.find("\x1eRLX-RESULT"));
  CHECK(source.find("_rlx_drive") != std::string::npos);
  CHECK(source.find("[10, 20]") == std::string::npos);  // inputs come on stdin
  CHECK(source.find("30") == std::string::npos);        // expected answers never enter
  auto passwd = score_program(box, attacking("open('/etc/passwd').read()"), "add", kAddTests);
  CHECK(passwd.reward == 0.0);
  CHECK(passwd.reason.find("FileNotFoundError") != std::string::npos);
  // Writing: the host's home, the program's own directory, /usr.
  // The host's home (a HOME under /tmp would name the sandbox's own tmp: then another host directory).
  const char* home_env = std::getenv("HOME");
  const fs::path home = home_env && std::string(home_env).rfind("/tmp", 0) != 0 ? fs::path(home_env) : fs::path("/var/tmp");
  const fs::path planted = home / ("rlx-pwned-" + std::to_string(getpid()));
  for (const std::string& target : {planted.string(), std::string("/sandbox/program.py"), std::string("/usr/rlx-pwned")}) {
    auto write = score_program(box, attacking("open('" + target + "', 'w').write('pwned')"), "add", kAddTests);
    INFO(target << ": " << write.reason);
    CHECK(write.reward == 0.0);
    CHECK(write.reason.find("Error") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(planted));
  CHECK_FALSE(fs::exists("/usr/rlx-pwned"));
  // Its private /tmp is writable (and gone afterwards).
  auto tmp = score_program(box, attacking("open('/tmp/scratch', 'w').write('ok')"), "add", kAddTests);
  CHECK(tmp.reward == 1.0);
}

TEST_CASE("a program cannot reach the network, not even the host's loopback", "[envs][sandbox][defensive]") {
  const Sandbox box = test::open_sandbox();
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  REQUIRE(listener >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int port = ntohs(a.sin_port);
  auto call = score_program(box, attacking("socket.create_connection(('127.0.0.1', " + std::to_string(port) + "), 2)"),
                            "add", kAddTests);
  CHECK(call.reward == 0.0);
  CHECK((call.reason.find("ConnectionRefusedError") != std::string::npos ||
         call.reason.find("unreachable") != std::string::npos));
  // Nothing reached the host's listener.
  CHECK(accept(listener, nullptr, nullptr) < 0);
  close(listener);
  auto dns = score_program(box, attacking("socket.create_connection(('example.com', 80), 2)"), "add", kAddTests);
  CHECK(dns.reward == 0.0);
}

TEST_CASE("a fork bomb, an endless loop, a flood of output and a memory grab each end with 0 and the reason",
          "[envs][sandbox][defensive]") {
  const Sandbox box = test::open_sandbox(4.0);
  auto bomb = score_program(box, attacking("while True:\n    os.fork()"), "add", kAddTests);
  CHECK(bomb.reward == 0.0);
  CHECK(bomb.run.wall_s < 6.0);
  INFO(bomb.reason);
  auto loop = score_program(box, attacking("while True:\n    pass"), "add", kAddTests);
  CHECK(loop.reward == 0.0);
  // On a machine loaded by the rest of the suite the loop may be starved
  // before it spends its CPU time: then it is not judged at all.
  CHECK((loop.run.end == SandboxRun::End::cpu_limit || loop.run.end == SandboxRun::End::timed_out ||
         loop.run.end == SandboxRun::End::starved));
  CHECK((loop.reason.find("scored 0:") == 0 || loop.failure == InfraFailure::overloaded));
  auto sleeper = score_program(box, attacking("import time\ntime.sleep(60)"), "add", kAddTests);
  CHECK(sleeper.run.end == SandboxRun::End::timed_out);
  CHECK(sleeper.reason.find("timed out") != std::string::npos);
  CHECK(sleeper.run.wall_s < 6.0);
  auto flood = score_program(box, attacking("while True:\n    sys.stdout.write('x' * 65536)"), "add", kAddTests);
  CHECK(flood.run.end == SandboxRun::End::output_limit);
  CHECK(flood.run.out.size() <= box.options().limits.output_bytes);
  CHECK(flood.reward == 0.0);
  auto grab = score_program(box, attacking("hog = bytearray(8 * 1024 ** 3)"), "add", kAddTests);
  CHECK(grab.reward == 0.0);
  CHECK(grab.reason.find("MemoryError") != std::string::npos);
  auto disk = score_program(box, attacking("open('/tmp/big', 'wb').write(b'x' * (64 << 20))"), "add", kAddTests);
  CHECK(disk.reward == 0.0);
  // After all that, the sandbox still runs programs.
  CHECK(score_program(box, "def add(a, b):\n    return a + b\n", "add", kAddTests).reward == 1.0);
}

TEST_CASE("a sandbox that cannot start says why", "[envs][sandbox]") {
  SandboxOptions o;
  o.bwrap = "/nonexistent/bwrap";
  auto s = Sandbox::open(o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("apt-get install bubblewrap") != std::string::npos);
}

namespace {

// A bwrap in front of the real one that fails its setup, as bwrap does
// (exit code 1, a "bwrap: ..." line), while the file `broken` exists.
struct BreakableBwrap {
  fs::path dir = fs::temp_directory_path() / ("rlx-bwrap-" + std::to_string(getpid()));
  BreakableBwrap() {
    fs::create_directories(dir);
    std::ofstream(dir / "bwrap") << "#!/bin/sh\n[ -e " << (dir / "broken").string()
                                 << " ] && { echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2; "
                                    "exit 1; }\nexec /usr/bin/bwrap \"$@\"\n";
    fs::permissions(dir / "bwrap", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
  }
  ~BreakableBwrap() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  void brk() { std::ofstream(dir / "broken") << "x"; }
};

}  // namespace

TEST_CASE("bubblewrap failing its own setup is the machinery's failure, not a score, but a program saying so fails on its own",
          "[envs][sandbox][infra]") {
  BreakableBwrap fake;
  SandboxOptions o;
  o.bwrap = (fake.dir / "bwrap").string();
  auto box = Sandbox::open(o);
  INFO((box ? std::string() : box.error().message));
  REQUIRE(box.ok());
  // A program that imitates bwrap's failure (its line, its exit code 1)
  // ran: its failure is its own, a score of 0.
  auto mimic = score_program(*box, "import sys\nsys.stderr.write('bwrap: Can\\'t mount proc\\n')\nsys.exit(1)\n",
                             "add", kAddTests);
  CHECK(mimic.failure == InfraFailure::none);
  CHECK(mimic.run.end == SandboxRun::End::exited);
  CHECK(mimic.reward == 0.0);
  fake.brk();
  auto broken = score_program(*box, "def add(a, b):\n    return a + b\n", "add", kAddTests);
  CHECK(broken.run.end == SandboxRun::End::setup_failed);
  CHECK(broken.run.machinery_failed());
  CHECK(broken.failure == InfraFailure::sandbox_setup);
  CHECK(broken.reason.find("not scored (sandbox_setup)") == 0);
  CHECK(broken.reason.find("Can't mount proc") != std::string::npos);
}

TEST_CASE("a sandbox that cannot be created (no file descriptor left) is the machinery's failure",
          "[envs][sandbox][infra]") {
  const Sandbox box = test::open_sandbox();
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  // Use up every descriptor under a low limit, then ask for a run.
  rlimit low = before;
  low.rlim_cur = 256;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> held;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY)) >= 0;) held.push_back(fd);
  const auto r = score_program(box, "def add(a, b):\n    return a + b\n", "add", kAddTests);
  for (int fd : held) ::close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &before) == 0);
  CHECK(r.run.end == SandboxRun::End::not_started);
  CHECK(r.failure == InfraFailure::sandbox_start);
  INFO(r.reason);
  CHECK(r.reason.find("not scored (sandbox_start)") == 0);
  // With descriptors back, the same sandbox runs again.
  CHECK(score_program(box, "def add(a, b):\n    return a + b\n", "add", kAddTests).reward == 1.0);
}

TEST_CASE("a program starved of CPU by an overloaded machine is not judged, but one that sleeps through its time is",
          "[envs][sandbox][infra]") {
  SandboxOptions o;
  o.limits.wall_s = 2.0;
  o.limits.cpu_s = 30.0;  // the loop cannot reach its CPU limit within the wall clock
  auto box = Sandbox::open(o);
  REQUIRE(box.ok());
  // Overload one CPU: this thread's children run on it only, beside four
  // busy processes pinned there too, each in a session of its own (the
  // kernel's autogroups share a CPU between sessions, and the sandbox
  // runs in a new session of its own).
  cpu_set_t all{}, one{};
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &all)) ++cpu;
  CPU_SET(cpu, &one);
  std::vector<pid_t> hogs;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();
      sched_setaffinity(0, sizeof one, &one);
      for (;;) asm volatile("");
    }
    hogs.push_back(pid);
  }
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const auto looped = box->run("while True:\n    pass\n", "");
  const auto slept = box->run("import time\ntime.sleep(60)\n", "");
  sched_setaffinity(0, sizeof all, &all);
  for (const pid_t pid : hogs) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  INFO(looped.reason());
  CHECK(looped.end == SandboxRun::End::starved);
  CHECK(looped.waited_s > looped.cpu_s);
  CHECK(looped.machinery_failed());
  INFO(slept.reason());
  CHECK(slept.end == SandboxRun::End::timed_out);  // sleeping is the program's own doing
  CHECK_FALSE(slept.machinery_failed());
}

TEST_CASE("a program that closes its output and sleeps is killed at the wall clock, not waited for",
          "[envs][sandbox][defensive]") {
  const Sandbox box = test::open_sandbox(2.0);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = box.run("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)\n", "");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.end == SandboxRun::End::timed_out);
  CHECK(took < 5.0);
  CHECK_FALSE(r.machinery_failed());
}
