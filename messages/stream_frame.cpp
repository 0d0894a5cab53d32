#include "messages/stream_frame.hpp"

#include <array>
#include <cstring>
#include <string>

namespace rlx {

Result<std::size_t> frame_table_bytes(const void* head) {
  std::uint32_t count_minus_one = 0;
  std::memcpy(&count_minus_one, head, 4);
  if (count_minus_one >= kMaxFrameSegments)
    return make_error(Errc::malformed_message,
                      "a frame claims " + std::to_string(std::uint64_t{count_minus_one} + 1) + " segments");
  const std::size_t segments = std::size_t{count_minus_one} + 1;
  return (4 + 4 * segments + 7) / 8 * 8;
}

Result<std::uint64_t> frame_total_bytes(const void* table, std::size_t table_bytes, std::uint64_t max_bytes) {
  std::uint32_t count_minus_one = 0;
  std::memcpy(&count_minus_one, table, 4);
  std::uint64_t words = 0;
  const auto* sizes = static_cast<const std::uint8_t*>(table) + 4;
  for (std::uint32_t i = 0; i <= count_minus_one; ++i) {
    std::uint32_t w = 0;
    std::memcpy(&w, sizes + 4 * i, 4);
    words += w;
  }
  const std::uint64_t total = table_bytes + words * 8;
  if (total > max_bytes)
    return make_error(Errc::message_too_large,
                      "a frame of " + std::to_string(total) + " bytes (at most " + std::to_string(max_bytes) + ")");
  return total;
}

Result<std::uint64_t> framed_size(const std::uint8_t* bytes, std::uint64_t size, std::uint64_t pos,
                                  std::uint64_t max_bytes) {
  const std::uint64_t left = size - pos;
  if (left < kFrameHeadBytes)
    return make_error(Errc::truncated_message, std::to_string(left) + " bytes left, a frame needs at least 8");
  auto table = frame_table_bytes(bytes + pos);
  if (!table) return table.error();
  if (*table > left) return make_error(Errc::truncated_message, "the segment table is cut off");
  auto total = frame_total_bytes(bytes + pos, *table, max_bytes);
  if (!total) return total;
  if (*total > left)
    return make_error(Errc::truncated_message,
                      "a frame of " + std::to_string(*total) + " bytes, " + std::to_string(left) + " remain");
  return total;
}

Result<WireBuffer> read_stream_frame(const ReadExact& read_exact, std::size_t max_bytes,
                                     kj::Array<capnp::word>* reuse) {
  return read_stream_frame(read_exact, max_bytes, reuse, nullptr, nullptr);
}

Result<WireBuffer> read_stream_frame(const ReadExact& read_exact, std::size_t max_bytes,
                                     kj::Array<capnp::word>* reuse, const PlaceLast& place, std::byte** placed) {
  if (placed) *placed = nullptr;
  std::array<std::uint8_t, 4 + 4 * kMaxFrameSegments + 4> table{};  // the largest table there is
  if (auto r = read_exact(table.data(), kFrameHeadBytes); !r) return r.error();
  auto table_bytes = frame_table_bytes(table.data());
  if (!table_bytes) return table_bytes.error();
  if (*table_bytes > kFrameHeadBytes)
    if (auto r = read_exact(table.data() + kFrameHeadBytes, *table_bytes - kFrameHeadBytes); !r) return r.error();
  auto total = frame_total_bytes(table.data(), *table_bytes, max_bytes);
  if (!total) return total.error();
  // The last segment somewhere else: only a table of two or more segments.
  std::uint32_t count_minus_one = 0, last_words = 0;
  std::memcpy(&count_minus_one, table.data(), 4);
  std::memcpy(&last_words, table.data() + 4 + 4 * std::size_t{count_minus_one}, 4);
  std::byte* last = place && placed && count_minus_one > 0 && last_words > 0
                        ? place(count_minus_one + 1, std::uint64_t{last_words} * 8)
                        : nullptr;
  const std::uint64_t here = *total - (last ? std::uint64_t{last_words} * 8 : 0);
  const std::size_t words = here / 8;
  kj::Array<capnp::word> array;
  if (reuse) {
    if (reuse->size() < words) *reuse = kj::heapArray<capnp::word>(words);
  } else {
    array = kj::heapArray<capnp::word>(words);
  }
  auto* out = reinterpret_cast<std::uint8_t*>(reuse ? reuse->begin() : array.begin());
  std::memcpy(out, table.data(), *table_bytes);
  if (auto r = read_exact(out + *table_bytes, here - *table_bytes); !r) return r.error();
  if (last) {
    if (auto r = read_exact(last, std::uint64_t{last_words} * 8); !r) return r.error();
    *placed = last;
  }
  if (reuse) return WireBuffer::borrowed(kj::arrayPtr(reuse->begin(), words), here);
  return WireBuffer(std::move(array));
}

}  // namespace rlx
