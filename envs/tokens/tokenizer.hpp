// The token policy's vocabulary: characters. Ids 0..2 are the specials
// (padding, end of sequence, start of sequence), then printable ASCII and
// the newline. Small enough for a model a 2-core machine can train, and
// every program text round-trips. CAF-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

struct Tokenizer {
  static constexpr std::int64_t pad = 0, eos = 1, bos = 2;
  static constexpr std::int64_t vocab = 3 + 95 + 1;  // specials, ' '..'~', '\n'

  // A character outside the vocabulary (a tab, a non-ASCII byte) becomes ' '.
  static std::vector<std::int64_t> encode(std::string_view text);
  // Specials are dropped; decoding stops at eos.
  static std::string decode(const std::vector<std::int64_t>& ids);
};

}  // namespace rlx
