#include "policy/threads.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <mutex>

#include <ATen/Parallel.h>

namespace rlx {

void configure_compute_threads(int n) {
  at::set_num_threads(n);
  // The inter-op pool can be sized once per process, before it is used.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] { at::set_num_interop_threads(1); });
  // OpenBLAS is found at run time (Debian's BLAS alternatives), so look the
  // setter up instead of linking it.
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

void rerun_with_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);  // only returns when it failed (no /proc): go on spinning
}

}  // namespace rlx
