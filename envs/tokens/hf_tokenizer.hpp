// A Hugging Face tokenizer.json of the byte-level BPE kind (issue 26): the
// tokenizers of the Qwen2/Qwen3(-MoE), Llama 3, GPT-2 and OLMoE families.
// Encoding, in the order the tokenizers library applies it:
//   1. added tokens (<|im_start|>, <|endoftext|>, ...) are found in the raw
//      text first (longest at a position) and become their ids;
//   2. each stretch between them is normalised (none, or NFC) and split
//      by the pre-tokenizer: a Split on the file's regex (behaviour
//      Isolated) then ByteLevel without its own regex (Qwen, Llama 3), or
//      ByteLevel with GPT-2's regex (GPT-2, OLMoE);
//   3. each piece's bytes become GPT-2's byte characters and the BPE merges
//      apply by rank (with ignore_merges, a piece that is a whole token is
//      taken as it is).
// Decoding maps each token back to its bytes (ByteLevel decoder). A file
// that needs anything else (another model type, normaliser or
// pre-tokenizer, byte fallback, an added token with lstrip/rstrip or
// single_word) is refused at load, naming what. The regexes run on ICU,
// with `\s` read as Unicode White_Space (what the tokenizers library's
// Oniguruma means by it). CAF-free, torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"

namespace rlx {

class HfTokenizer {
 public:
  // tokenizer.json's text; `name` for messages (its path).
  static Result<std::shared_ptr<const HfTokenizer>> parse(std::string_view json_text, std::string name);
  static Result<std::shared_ptr<const HfTokenizer>> load(const std::string& path);
  ~HfTokenizer();

  // `specials`: added tokens written in the text become their ids (what
  // the tokenizers library does by default); false: they are encoded as
  // plain text (text from an untrusted harness or tool). Bytes that are
  // not UTF-8 become U+FFFD (the library takes only UTF-8 text).
  std::vector<std::int64_t> encode(std::string_view text, bool specials = true) const;
  // The bytes the tokens stand for (not always whole UTF-8 characters for
  // a part of a sequence); `skip_special`: special added tokens left out.
  std::string decode(const std::vector<std::int64_t>& ids, bool skip_special = false) const;
  // One token's bytes ("" for an id outside the vocabulary).
  std::string token_bytes(std::int64_t id) const;

  // Ids 0..vocab_size()-1, added tokens included.
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(tokens_.size()); }
  std::optional<std::int64_t> id_of(std::string_view token) const;
  bool is_special(std::int64_t id) const;
  const std::string& name() const { return name_; }

 private:
  struct Impl;
  HfTokenizer();
  void encode_text(std::string_view text, std::vector<std::int64_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const;

  std::string name_;
  std::vector<std::string> tokens_;  // [vocab] each id's byte-level text (added tokens: their content)
  std::unordered_map<std::string, std::int64_t> ids_;
  std::unordered_map<std::string, std::int32_t> ranks_;  // "left right" -> merge rank
  struct Added {
    std::string content;
    std::int64_t id = 0;
    bool special = false;
  };
  std::vector<Added> added_;  // longest first
  enum class Kind : std::uint8_t { learned, added, special };
  std::vector<Kind> kind_;  // [vocab]
  bool nfc_ = false, ignore_merges_ = false, add_prefix_space_ = false;
  std::unique_ptr<Impl> impl_;  // the compiled pre-tokenizer regex (ICU)
};

}  // namespace rlx
