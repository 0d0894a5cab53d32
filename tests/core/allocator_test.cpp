// The rlx binary's allocator: built with jemalloc, it keeps freed pages
// (its malloc_conf took effect: the symbol reached jemalloc), and
// MALLOC_CONF in the environment overrides that; without it, it says glibc.
// The test binary itself is on glibc (only rlx links jemalloc), so both
// allocators stay under test; it runs itself again over jemalloc to test
// the bound on kept pages.
#include "core/allocator.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/free_memory.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

// What `env ENV rlx --version` prints, with its exit status.
test::CommandOutput rlx_version(const std::string& env) {
  return test::run_command("env " + env + " " RLX_BINARY " --version 2>&1");
}

}  // namespace

TEST_CASE("the rlx binary names its allocator and, built with jemalloc, keeps freed pages", "[core][memory]") {
  const auto [out, rc] = rlx_version("");
  INFO(out);
  CHECK(rc == 0);
#ifdef RLX_JEMALLOC_LINKED
  CHECK(out.find("memory: jemalloc 5.") != std::string::npos);
  CHECK(out.find("(freed pages kept)") != std::string::npos);
#elif defined(RLX_SANITIZED)
  CHECK(out.find("memory: AddressSanitizer's malloc") != std::string::npos);
#else
  CHECK(out.find("memory: glibc malloc") != std::string::npos);
#endif
}

TEST_CASE("MALLOC_CONF in the environment overrides the rlx binary's jemalloc settings", "[core][memory]") {
#ifndef RLX_JEMALLOC_LINKED
  test::skip_test("this build's rlx does not link jemalloc (RLX_JEMALLOC=OFF, not found, or a sanitizer build)");
#else
  const auto [out, rc] = rlx_version("MALLOC_CONF=dirty_decay_ms:10000,muzzy_decay_ms:0");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("memory: jemalloc 5.") != std::string::npos);
  CHECK(out.find("(freed pages given back after 10 s)") != std::string::npos);
#endif
}

TEST_CASE("an allocator is described by what it does with freed pages", "[core][memory]") {
  // The test binary does not link jemalloc.
#ifdef RLX_SANITIZED
  CHECK(describe(current_allocator()) == "AddressSanitizer's malloc");
#else
  CHECK(describe(current_allocator()) == "glibc malloc");
#endif
  CHECK_FALSE(allocator_keeps_freed_pages(current_allocator()));
  AllocatorInfo je{true, "5.3.0-0-g54eaed1d", -1, -1};
  CHECK(describe(je) == "jemalloc 5.3.0 (freed pages kept)");
  CHECK(allocator_keeps_freed_pages(je));
  je.dirty_decay_ms = 10000;
  je.muzzy_decay_ms = 0;
  CHECK(describe(je) == "jemalloc 5.3.0 (freed pages given back after 10 s)");
  CHECK_FALSE(allocator_keeps_freed_pages(je));
  je.muzzy_decay_ms = 2500;
  CHECK(describe(je) == "jemalloc 5.3.0 (freed pages given back lazily after 10 s, purged after 2.5 s)");
  je.dirty_decay_ms = -1;
  je.muzzy_decay_ms = 0;  // dirty pages never decay, so muzzy ones never arise
  CHECK(describe(je) == "jemalloc 5.3.0 (freed pages kept)");
  CHECK(allocator_keeps_freed_pages(je));
  CHECK_FALSE(allocator_keeps_freed_pages(AllocatorInfo{}));
}

// Run by the next test in a child of this binary over jemalloc (LD_PRELOAD), with its pages kept.
TEST_CASE("kept pages beyond their bound go back to the system (run over jemalloc)", "[.][jemalloc-child]") {
  REQUIRE(current_allocator().jemalloc);
  REQUIRE(allocator_keeps_freed_pages(current_allocator()));
  constexpr std::size_t kBlocks = 96, kBlock = 4u << 20;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(std::malloc(kBlock));
    REQUIRE(blocks.back());
    std::memset(blocks.back(), 1, kBlock);
  }
  const auto live = heap_use().live;
  CHECK(live >= kBlocks * kBlock);
  for (auto* b : blocks) std::free(b);
  const auto use = heap_use();
  INFO("live " << (use.live >> 20) << " MB, kept " << (use.kept >> 20) << " MB");
  CHECK(use.kept >= kBlocks * kBlock);                 // freed, still the process's
  CHECK(bound_kept_pages(std::size_t{1} << 30) == 0);  // within a 1 GiB floor: kept for reuse
  CHECK(heap_use().kept >= kBlocks * kBlock);
  const auto before = resident_bytes();
  CHECK(bound_kept_pages(std::size_t{64} << 20) >= kBlocks * kBlock);  // over a 64 MiB floor: given back
  const auto after = resident_bytes();
  INFO("resident " << (before >> 20) << " MB before, " << (after >> 20) << " MB after");
  CHECK(heap_use().kept < kBlocks * kBlock / 8);
  CHECK(before >= after + kBlocks * kBlock / 2);
}

TEST_CASE("jemalloc's kept pages are bounded by the live heap and given back beyond it", "[core][memory]") {
#ifndef RLX_JEMALLOC_SO
  test::skip_test("this build found no jemalloc shared library (RLX_JEMALLOC=OFF, not found, or a sanitizer build)");
#else
  // On glibc (this binary) nothing is jemalloc's.
  CHECK(heap_use().live == 0);
  CHECK(bound_kept_pages(0) == 0);
  const auto [out, rc] = test::run_command("env LD_PRELOAD=" RLX_JEMALLOC_SO
                                           " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1,narenas:1 "
                                           "/proc/" +
                                           std::to_string(getpid()) + "/exe '[jemalloc-child]' 2>&1");
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("1 test case") != std::string::npos);
#endif
}
