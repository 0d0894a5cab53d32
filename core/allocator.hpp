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

#include <cstddef>
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

// jemalloc's bytes in live allocations and in the freed pages it keeps
// (dirty pages over every arena); zeros on any other allocator.
struct HeapUse {
  std::size_t live = 0, kept = 0;
};
HeapUse heap_use();

// Kept pages are reused by the next step's tensors of the same sizes, but
// not all of them fit: a run whose explorers decode while its learner
// trains interleaves blocks of other sizes, and the kept pages grew by
// 0.15 GB an update on a 0.94 B-parameter LoRA run (2.5 -> 5.1 GB in 14
// updates, against 2.2-2.8 GB with nothing kept; docs/results/hf-models.md
// "Memory of the largest runs"). Gives every kept page back (jemalloc's
// purge of all arenas) when they exceed max(floor, live / 4): a step's
// working set stays kept, growth does not. Returns the bytes given back
// (0: under the bound, or not jemalloc).
std::size_t bound_kept_pages(std::size_t floor = std::size_t{1} << 30);

// One line for logs and `rlx --version`, e.g. "jemalloc 5.3.0 (freed pages
// kept)", "jemalloc 5.3.0 (freed pages given back after 10 s)", "glibc malloc"
// or "AddressSanitizer's malloc".
std::string describe(const AllocatorInfo& info);

}  // namespace rlx
