// The benchmarks behind docs/BENCHMARKS.md. Each reports a ratio against
// a raw baseline measured in the same run (these machines are noisy).
#pragma once

#include <string>

namespace rlx {

struct BenchOptions {
  std::string only;        // run benchmarks whose name contains this (empty = all)
  int seeds = 3;           // seeds for time-to-solve benchmarks
  std::string markdown;    // also write a Markdown table here
};

// Runs the benchmarks, prints a table; returns 0.
int run_benchmarks(const BenchOptions& options);

}  // namespace rlx
