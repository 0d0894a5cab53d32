// The sandbox for model-written programs: evaluations per second on one
// core through bubblewrap against the same program and driver run by the
// interpreter directly (docs/BENCHMARKS.md). What the sandbox costs is
// its start: namespaces, mounts, a second process.
#include <fmt/format.h>

#include "bench/common.hpp"
#include "envs/code/program_tests.hpp"

namespace rlx {

namespace {

// Evaluations per second of `program` (one after another: one core).
double evals_per_s(const Sandbox& box, const std::string& program, bool sandboxed, int n) {
  const std::string input = "[2, 3]\n[-1, 1]\n[10, 20]\n[0, 0]\n";
  const auto t = Clock::now();
  for (int i = 0; i < n; ++i) {
    const SandboxRun r = sandboxed ? box.run(program, input) : box.run_unsandboxed(program, input);
    if (!r.ok()) std::fprintf(stderr, "  sandbox bench: a run failed: %s\n", r.reason().c_str());
  }
  return n / seconds_since(t);
}

// A run's process started by vfork (the sandbox's way) against fork, from
// a process holding 1 GB (a learner's holds 1-2 GB): fork copies the page
// tables and write-protects every page for each run.
Row spawn_from_large_process(const std::string& driver) {
  const std::string program = "def add(a, b):\n    return a + b\n" + driver;
  SandboxOptions vf, fk;
  fk.copy_on_fork = true;
  auto a = Sandbox::open(vf), b = Sandbox::open(fk);
  if (!a || !b) return {"sandbox spawn from a 1 GB process", "not run", "no sandbox", "-", ""};
  std::vector<char> held(std::size_t{1} << 30, 1);  // touched: resident
  std::vector<double> with_vfork, with_fork;
  for (int round = 0; round < 3; ++round) {
    with_vfork.push_back(evals_per_s(*a, program, true, 20));
    with_fork.push_back(evals_per_s(*b, program, true, 20));
  }
  const double v = median(with_vfork), f = median(with_fork);
  std::fprintf(stderr, "  sandbox from a 1 GB process: %.1f evals/s (vfork) vs %.1f (fork); %d\n", v, f, held[12345]);
  return {"sandboxed program evaluation from a process holding 1 GB", fmt::format("{:.1f} evals/s/core (vfork)", v),
          fmt::format("{:.1f} evals/s/core, fork", f), fmt::format("{:.2f}", v / f),
          "the one-line function; medians of 3 rounds of 20"};
}

}  // namespace

std::vector<Row> bench_sandbox() {
  auto box = Sandbox::open();
  if (!box) {
    std::fprintf(stderr, "  sandbox: %s\n", box.error().message.c_str());
    return {{"sandbox", "not run", box.error().message, "-", ""}};
  }
  const std::string driver =
      "\nimport json, sys\nfor line in sys.stdin.read().splitlines():\n    print(json.dumps(add(*json.loads(line))))\n";
  std::vector<Row> rows;
  const struct {
    const char* name;
    std::string program;
    int n;
  } cases[] = {
      {"a one-line function, 4 tests", "def add(a, b):\n    return a + b\n" + driver, 40},
      {"a function looping 300k times (~45 ms), 4 tests",
       "def add(a, b):\n    s = 0\n    for i in range(300000):\n        s += i % 7\n    return a + b + s * 0\n" + driver, 10},
  };
  for (const auto& c : cases) {
    std::vector<double> in, out;
    for (int round = 0; round < 3; ++round) {
      out.push_back(evals_per_s(*box, c.program, false, c.n));
      in.push_back(evals_per_s(*box, c.program, true, c.n));
    }
    const double s = median(in), u = median(out);
    std::fprintf(stderr, "  sandbox, %s: %.1f evals/s vs %.1f unsandboxed\n", c.name, s, u);
    rows.push_back({fmt::format("sandboxed program evaluation: {}", c.name), fmt::format("{:.1f} evals/s/core", s),
                    fmt::format("{:.1f} evals/s/core, python3 without bwrap", u), fmt::format("{:.2f}", s / u),
                    fmt::format("bubblewrap {}, one at a time; medians of 3 rounds of {}",
                                "(all namespaces, ro /usr, tmpfs /tmp, rlimits)", c.n)});
  }
  rows.push_back(spawn_from_large_process(driver));
  return rows;
}

}  // namespace rlx
