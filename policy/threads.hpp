// Thread counts of the compute libraries for this process.
#pragma once

namespace rlx {
// Process-wide (run_cluster calls it with the topology's learner.threads).
// Sets LibTorch's intra-op threads and, when OpenBLAS is the BLAS, its
// thread pool to `n` (actors already run in parallel; nested pools on 2
// cores only add contention).
void configure_compute_threads(int n);

// LibTorch's intra-op threads are an OpenMP team (libgomp), whose threads
// spin at each barrier before they sleep. On 2 cores, with actors,
// sandboxes and the other thread of the team wanting the same cores, the
// spinning is a third of the time: `rlx sft` with 2 threads ran 414
// tokens/s spinning and 627 with OMP_WAIT_POLICY=PASSIVE
// (docs/BENCHMARKS.md "OpenMP threads that sleep instead of spinning").
// libgomp reads its environment as it loads, before main, so a command
// that computes runs itself again with OMP_WAIT_POLICY=PASSIVE, once,
// before it does anything else (~0.4 s of start-up), unless the
// environment already says OMP_WAIT_POLICY or GOMP_SPINCOUNT (then that
// choice stands). Returns only if nothing was run again (the choice was
// made, or exec failed: then the process goes on as it is).
void rerun_with_passive_openmp(char** argv);
}  // namespace rlx
