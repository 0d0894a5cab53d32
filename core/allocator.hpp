// Which memory allocator this process runs on, and whether it keeps the
// pages it is given back.
//
// The rlx binary links jemalloc (when the build finds it; not in sanitizer
// builds) with its decay off: freed pages stay with the process and are
// reused, not returned to the kernel and faulted in again. LibTorch frees
// and reallocates its large tensors at every training step, and with
// glibc each of those pages faulted in anew: on a paravirtualised machine a
// quarter of `rlx sft`'s time (docs/results/threads-and-memory.md, "An allocator that keeps
// its pages"). The settings are the binary's `malloc_conf`
// (tools/malloc_conf.cpp); MALLOC_CONF in the environment overrides them.
//
// Nothing here needs jemalloc to build: it is looked up in the running
// process (linked or LD_PRELOADed alike).
#pragma once

#include <string>

namespace rlx {

struct AllocatorInfo {
  bool jemalloc = false;
  std::string version;          // jemalloc's, e.g. "5.3.0-0-g54eaed1d"; empty for glibc
  long long dirty_decay_ms = 0;  // jemalloc's opt.dirty_decay_ms (-1: never returned)
  long long muzzy_decay_ms = 0;
  bool sanitizer = false;        // built with AddressSanitizer, whose malloc replaces glibc's
};

AllocatorInfo current_allocator();

// True when freed pages stay with the process (jemalloc, dirty decay -1).
// glibc's heap trim (core/free_memory.hpp) is then pointless.
bool allocator_keeps_freed_pages(const AllocatorInfo& info);

// One line for logs and `rlx --version`, e.g. "jemalloc 5.3.0 (freed pages
// kept)", "jemalloc 5.3.0 (freed pages given back after 10 s)", "glibc malloc"
// or "AddressSanitizer's malloc".
std::string describe(const AllocatorInfo& info);

}  // namespace rlx
