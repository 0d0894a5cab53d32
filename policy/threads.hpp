// Thread counts of the compute libraries for this process.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rlx {
// Process-wide (run_cluster calls it with the topology's learner.threads).
// Sets LibTorch's intra-op threads and, when OpenBLAS is the BLAS, its
// thread pool to `n` (actors already run in parallel; nested pools on 2
// cores only add contention).
void configure_compute_threads(int n);

// Compute threads that sleep when idle instead of spinning. LibTorch's
// intra-op threads are an OpenMP team (libgomp), whose threads spin at
// each barrier before they sleep, and OpenBLAS's threads yield for ~0.1 s
// before they sleep. On 2 cores, with actors, sandboxes and the other
// thread of the team wanting the same cores, that spinning took a third
// of `rlx sft`'s time: 393-407 tokens/s spinning, 647-650 with
// OMP_WAIT_POLICY=PASSIVE, 724-760 with OPENBLAS_THREAD_TIMEOUT=4 as well
// (docs/results/threads-and-memory.md "OpenMP threads that sleep instead of spinning").
// Both libraries read their environment as they load, before main, so a
// command that computes runs itself again with them set, once, before it
// does anything else (~0.2 s of start-up).

// What to add to an environment (`env` looks a name up) so that idle
// compute threads sleep: OMP_WAIT_POLICY=PASSIVE unless OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is set, OPENBLAS_THREAD_TIMEOUT=4 unless it or
// GOTO_THREAD_TIMEOUT is set. A choice already made stands.
std::vector<std::pair<std::string, std::string>> sleeping_thread_settings(
    const std::function<const char*(const char*)>& env);

// Adds those settings and runs this program again (execv of /proc/self/exe,
// the same arguments), when there is anything to add. Returns only if
// nothing was added, or exec failed (the process then goes on as it is).
void rerun_with_sleeping_threads(char** argv);
}  // namespace rlx
