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
  return rows;
}

}  // namespace rlx
