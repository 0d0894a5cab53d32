// Thread counts of the compute libraries for this process.
#pragma once

namespace rlx {
// Process-wide (run_cluster calls it with the topology's learner.threads).
// Sets LibTorch's intra-op threads and, when OpenBLAS is the BLAS, its
// thread pool to `n` (actors already run in parallel; nested pools on 2
// cores only add contention).
void configure_compute_threads(int n);
}  // namespace rlx
