#include "policy/threads.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

std::vector<std::pair<std::string, std::string>> sleeping_thread_settings(
    const std::function<const char*(const char*)>& env) {
  std::vector<std::pair<std::string, std::string>> add;
  if (env("OMP_WAIT_POLICY") == nullptr && env("GOMP_SPINCOUNT") == nullptr) add.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  // 2^4 cycles of yielding before an idle OpenBLAS thread sleeps (its default: 2^28, ~0.1 s).
  if (env("OPENBLAS_THREAD_TIMEOUT") == nullptr && env("GOTO_THREAD_TIMEOUT") == nullptr)
    add.emplace_back("OPENBLAS_THREAD_TIMEOUT", "4");
  return add;
}

void rerun_with_sleeping_threads(char** argv) {
  const auto add = sleeping_thread_settings([](const char* name) { return std::getenv(name); });
  if (add.empty()) return;
  for (const auto& [name, value] : add)
    if (setenv(name.c_str(), value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);  // only returns when it failed (no /proc): go on as we are
}

}  // namespace rlx
