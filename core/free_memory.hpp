// Handing freed heap memory back to the system.
//
// glibc serves a large block (LibTorch's activations and gradients, 1-32
// MB) from its heap rather than by mmap once a freed mmap'd block has
// raised the mmap threshold, and the heap keeps its pages after a free
// unless they are at its top. A process that trains interleaves those
// blocks with small long-lived ones, so its resident memory climbs with
// every update: 0.5 -> 1.4 GB in 90 code-RL updates, of which 0.24 GB in
// use (docs/results/token-policy.md, "Resident memory"). Returning whole free pages
// every few seconds (malloc_trim) keeps it flat at the cost of faulting
// them in again; a fixed low mmap threshold does the same but made each
// update 45% slower. That is glibc's malloc: the rlx binary built with
// jemalloc keeps its freed pages instead and gives them back only when
// they outgrow the live heap (bound_kept_pages, core/allocator.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace rlx {

// This process's resident memory in bytes (/proc/self/statm); 0 if unreadable.
std::size_t resident_bytes();

// Returns every whole free page of the heap to the system (malloc_trim(0));
// under jemalloc keeping its pages, the kept pages when they outgrow their
// bound (bound_kept_pages). True when some memory was released.
bool return_free_memory();

// While it lives, a thread calls return_free_memory() every `period`.
class FreeMemoryReturner {
 public:
  explicit FreeMemoryReturner(std::chrono::milliseconds period);
  ~FreeMemoryReturner();
  FreeMemoryReturner(const FreeMemoryReturner&) = delete;
  FreeMemoryReturner& operator=(const FreeMemoryReturner&) = delete;

  // Rounds done so far.
  std::uint64_t rounds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
