// Freed heap pages go back to the system: a heap fragmented the way a
// training step leaves it (large blocks between small live ones) shrinks
// when return_free_memory() runs, and the returner thread runs it on its
// period and stops at once when dropped.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/free_memory.hpp"

using namespace rlx;
using namespace std::chrono_literals;

TEST_CASE("the heap's freed pages between live blocks go back to the system", "[core][memory]") {
  REQUIRE(resident_bytes() > 0);
  // A freed 16 MB mmap'd block raises glibc's mmap threshold (up to its
  // 32 MB cap): the 1 MB blocks below then come from the heap, as
  // LibTorch's temporaries do.
  void* raise = std::malloc(16u << 20);
  REQUIRE(raise);
  std::memset(raise, 1, 16u << 20);
  std::size_t seen = static_cast<volatile char*>(raise)[(16u << 20) - 1];  // (kept: the compiler may not drop it)
  std::free(raise);
  // Every other 1 MB block stays live, so the freed ones cannot merge
  // into the heap's top (which free() gives back by itself).
  constexpr std::size_t kBlocks = 192, kBlock = 1u << 20;
  std::vector<void*> blocks;
  bool got_all = true;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(std::malloc(kBlock));
    if (!blocks.back()) {
      got_all = false;
      continue;
    }
    std::memset(blocks.back(), 1, kBlock);
    seen += static_cast<volatile char*>(blocks.back())[kBlock - 1];
  }
  REQUIRE(got_all);
  REQUIRE(seen == kBlocks + 1);
  for (std::size_t i = 0; i < kBlocks; i += 2) std::free(blocks[i]);
  const std::size_t before = resident_bytes();
  return_free_memory();
  const std::size_t after = resident_bytes();
  for (std::size_t i = 1; i < kBlocks; i += 2) std::free(blocks[i]);
  INFO("resident " << (before >> 20) << " MB before, " << (after >> 20) << " MB after");
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator holds the memory, not glibc's heap: nothing to return.
  CHECK(after > 0);
#else
  CHECK(before >= after + (kBlocks / 2) * kBlock / 2);  // half of what was freed, at least
#endif
}

TEST_CASE("the memory returner runs on its period and stops at once when dropped", "[core][memory]") {
  {
    FreeMemoryReturner often(1ms);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (often.rounds() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    CHECK(often.rounds() >= 3);
  }
  const auto start = std::chrono::steady_clock::now();
  { FreeMemoryReturner rarely(std::chrono::hours(1)); }
  CHECK(std::chrono::steady_clock::now() - start < 10s);  // woken by the stop, not by its hour
}
