#include "core/allocator.hpp"

#include <dlfcn.h>
#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace rlx {
namespace {

using MallctlFn = int (*)(const char*, void*, std::size_t*, void*, std::size_t);

bool read_ssize(MallctlFn mallctl, const char* name, long long& out) {
  ssize_t v = 0;
  std::size_t size = sizeof v;
  if (mallctl(name, &v, &size, nullptr, 0) != 0) return false;
  out = v;
  return true;
}

MallctlFn jemalloc_mallctl() { return reinterpret_cast<MallctlFn>(dlsym(RTLD_DEFAULT, "mallctl")); }

// Every arena at once (jemalloc's MALLCTL_ARENAS_ALL).
#define RLX_ALL_ARENAS "4096"

std::string seconds(long long ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

AllocatorInfo current_allocator() {
  AllocatorInfo info;
#if defined(__SANITIZE_ADDRESS__)
  info.sanitizer = true;
#endif
  // Debian's jemalloc is built without a prefix: its mallctl is the one.
  auto mallctl = jemalloc_mallctl();
  if (!mallctl) return info;
  const char* version = nullptr;
  std::size_t size = sizeof version;
  if (mallctl("version", &version, &size, nullptr, 0) != 0 || !version) return info;
  info.jemalloc = true;
  info.version = version;
  read_ssize(mallctl, "opt.dirty_decay_ms", info.dirty_decay_ms);
  read_ssize(mallctl, "opt.muzzy_decay_ms", info.muzzy_decay_ms);
  return info;
}

bool allocator_keeps_freed_pages(const AllocatorInfo& info) {
  return info.jemalloc && info.dirty_decay_ms < 0;  // pages that never decay dirty never become muzzy
}

HeapUse heap_use() {
  HeapUse use;
  auto mallctl = jemalloc_mallctl();
  if (!mallctl) return use;
  std::uint64_t epoch = 1;  // statistics are a snapshot taken when the epoch moves
  std::size_t size = sizeof epoch;
  if (mallctl("epoch", &epoch, &size, &epoch, sizeof epoch) != 0) return use;
  std::size_t live = 0, dirty = 0, page = 0;
  size = sizeof live;
  if (mallctl("stats.allocated", &live, &size, nullptr, 0) != 0) return use;
  size = sizeof dirty;
  if (mallctl("stats.arenas." RLX_ALL_ARENAS ".pdirty", &dirty, &size, nullptr, 0) != 0) return use;
  size = sizeof page;
  if (mallctl("arenas.page", &page, &size, nullptr, 0) != 0) return use;
  use.live = live;
  use.kept = dirty * page;
  return use;
}

std::size_t bound_kept_pages(std::size_t floor) {
  const auto use = heap_use();
  if (use.kept == 0 || use.kept <= std::max(floor, use.live / 4)) return 0;
  auto mallctl = jemalloc_mallctl();
  if (mallctl("arena." RLX_ALL_ARENAS ".purge", nullptr, nullptr, nullptr, 0) != 0) return 0;
  return use.kept;
}

std::string describe(const AllocatorInfo& info) {
  if (!info.jemalloc) return info.sanitizer ? "AddressSanitizer's malloc" : "glibc malloc";
  const std::string version = info.version.substr(0, info.version.find('-'));
  if (info.dirty_decay_ms < 0) return "jemalloc " + version + " (freed pages kept)";
  // Dirty pages decay into muzzy ones (MADV_FREE: the kernel may take them,
  // else they are reused), which decay in turn (purged: faulted in anew).
  std::string s = "jemalloc " + version + " (freed pages given back ";
  if (info.muzzy_decay_ms == 0) return s + "after " + seconds(info.dirty_decay_ms) + ")";
  s += "lazily after " + seconds(info.dirty_decay_ms);
  if (info.muzzy_decay_ms > 0) s += ", purged after " + seconds(info.muzzy_decay_ms);
  return s + ")";
}

}  // namespace rlx
