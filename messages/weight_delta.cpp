#include "messages/weight_delta.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <zstd.h>

namespace rlx {
namespace {

constexpr int kZstdLevel = 1;  // level 1 against -1 and 3 (docs/results/across-nodes.md "Weight deltas")

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

std::uint32_t load32(const std::uint8_t* p) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// The base's 4 bytes at `at`, zeros past its end.
std::uint32_t base32(const std::uint8_t* base, std::size_t base_n, std::size_t at) {
  if (at + 4 <= base_n) return load32(base + at);
  std::uint8_t b[4] = {0, 0, 0, 0};
  for (std::size_t k = 0; k < 4 && at + k < base_n; ++k) b[k] = base[at + k];
  return load32(b);
}

std::uint8_t base8(const std::uint8_t* base, std::size_t base_n, std::size_t at) { return at < base_n ? base[at] : 0; }

}  // namespace

void encode_xor_delta(const std::uint8_t* plain, std::size_t n, const std::uint8_t* base, std::size_t base_n,
                      std::vector<std::uint8_t>& out) {
  thread_local std::vector<std::uint8_t> shuffled;
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx{ZSTD_createCCtx()};
  shuffled.resize(n);
  const std::size_t groups = n / 4;
  std::uint8_t* s0 = shuffled.data();
  std::uint8_t* s1 = s0 + groups;
  std::uint8_t* s2 = s1 + groups;
  std::uint8_t* s3 = s2 + groups;
  const std::size_t whole = std::min(groups, base_n / 4);  // groups the base covers in full
  for (std::size_t i = 0; i < whole; ++i) {
    const std::uint32_t w = load32(plain + 4 * i) ^ load32(base + 4 * i);
    s0[i] = static_cast<std::uint8_t>(w);
    s1[i] = static_cast<std::uint8_t>(w >> 8);
    s2[i] = static_cast<std::uint8_t>(w >> 16);
    s3[i] = static_cast<std::uint8_t>(w >> 24);
  }
  for (std::size_t i = whole; i < groups; ++i) {
    const std::uint32_t w = load32(plain + 4 * i) ^ base32(base, base_n, 4 * i);
    s0[i] = static_cast<std::uint8_t>(w);
    s1[i] = static_cast<std::uint8_t>(w >> 8);
    s2[i] = static_cast<std::uint8_t>(w >> 16);
    s3[i] = static_cast<std::uint8_t>(w >> 24);
  }
  for (std::size_t at = 4 * groups; at < n; ++at) shuffled[at] = plain[at] ^ base8(base, base_n, at);
  out.resize(ZSTD_compressBound(n));
  const std::size_t size = ZSTD_compressCCtx(cctx.get(), out.data(), out.size(), shuffled.data(), n, kZstdLevel);
  // Compressing into a buffer of compressBound cannot fail but for memory.
  if (ZSTD_isError(size)) throw std::bad_alloc();
  out.resize(size);
}

Result<void> apply_xor_delta(const std::uint8_t* delta, std::size_t delta_n, const std::uint8_t* base,
                             std::size_t base_n, std::uint8_t* into, std::size_t n) {
  thread_local std::vector<std::uint8_t> shuffled;
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx{ZSTD_createDCtx()};
  const unsigned long long declared = ZSTD_getFrameContentSize(delta, delta_n);
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared != n)
    return make_error(Errc::invalid_field, "weight delta: not a zstd frame of " + std::to_string(n) + " bytes");
  shuffled.resize(n);
  const std::size_t got = ZSTD_decompressDCtx(dctx.get(), shuffled.data(), n, delta, delta_n);
  if (ZSTD_isError(got) || got != n)
    return make_error(Errc::invalid_field, std::string("weight delta: ") +
                                               (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame"));
  const std::size_t groups = n / 4;
  const std::uint8_t* s0 = shuffled.data();
  const std::uint8_t* s1 = s0 + groups;
  const std::uint8_t* s2 = s1 + groups;
  const std::uint8_t* s3 = s2 + groups;
  const std::size_t whole = std::min(groups, base_n / 4);
  for (std::size_t i = 0; i < groups; ++i) {
    const std::uint32_t w = static_cast<std::uint32_t>(s0[i]) | static_cast<std::uint32_t>(s1[i]) << 8 |
                            static_cast<std::uint32_t>(s2[i]) << 16 | static_cast<std::uint32_t>(s3[i]) << 24;
    const std::uint32_t b = i < whole ? load32(base + 4 * i) : base32(base, base_n, 4 * i);
    const std::uint32_t v = w ^ b;
    std::memcpy(into + 4 * i, &v, 4);
  }
  for (std::size_t at = 4 * groups; at < n; ++at) into[at] = shuffled[at] ^ base8(base, base_n, at);
  return {};
}

}  // namespace rlx
