#include "core/free_memory.hpp"

#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stop_token>
#include <thread>

#include "core/allocator.hpp"

namespace rlx {

std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

bool return_free_memory() {
  static const bool kept = allocator_keeps_freed_pages(current_allocator());
  return kept ? bound_kept_pages() > 0 : malloc_trim(0) != 0;
}

struct FreeMemoryReturner::Impl {
  std::atomic<std::uint64_t> rounds{0};
  std::mutex mutex;
  std::condition_variable_any wake;
  std::jthread thread;  // last: stopped and joined before the rest goes
};

FreeMemoryReturner::FreeMemoryReturner(std::chrono::milliseconds period) : impl_(std::make_unique<Impl>()) {
  Impl* impl = impl_.get();
  impl->thread = std::jthread([impl, period](std::stop_token stop) {
    std::unique_lock lock(impl->mutex);
    for (;;) {
      impl->wake.wait_for(lock, stop, period, [] { return false; });  // a stop request wakes it at once
      if (stop.stop_requested()) return;
      return_free_memory();
      impl->rounds.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

FreeMemoryReturner::~FreeMemoryReturner() = default;

std::uint64_t FreeMemoryReturner::rounds() const { return impl_->rounds.load(std::memory_order_relaxed); }

}  // namespace rlx
