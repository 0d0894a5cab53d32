#include "envs/tokens/tokenizer.hpp"

namespace rlx {

std::vector<std::int64_t> Tokenizer::encode(std::string_view text) {
  std::vector<std::int64_t> ids;
  ids.reserve(text.size());
  for (const unsigned char c : text) {
    if (c == '\n') ids.push_back(vocab - 1);
    else if (c >= 32 && c <= 126) ids.push_back(3 + (c - 32));
    else ids.push_back(3);  // ' '
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& ids) {
  std::string s;
  for (const auto id : ids) {
    if (id == eos) break;
    if (id == vocab - 1) s.push_back('\n');
    else if (id >= 3 && id < vocab - 1) s.push_back(static_cast<char>(32 + (id - 3)));
  }
  return s;
}

}  // namespace rlx
