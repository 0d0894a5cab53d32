// The token policy's vocabulary. Two kinds, one interface:
//   - characters (the default): ids 0..2 are the specials (padding, end of
//     sequence, start of sequence), then printable ASCII and the newline;
//     a character outside them (a tab, a non-ASCII byte) becomes ' '.
//   - subword: a SentencePiece BPE vocabulary, read from the text file
//     `spm_export_vocab` writes (a piece and its score a line, in id order;
//     tools/train-tokenizer.sh makes one). Ids 0..3 are <pad>, </s>, <s>,
//     <unk>, then the 256 byte pieces <0x00>..<0xFF>, then the learned
//     pieces. Encoding applies the pieces' merges in score order, line by
//     line (a newline is the piece <0x0A>); a character no piece covers is
//     spelled as byte pieces, so every text round-trips exactly.
// Text is encoded in parts (a prompt, a turn, an observation each on its
// own), so a piece never spans two parts, and never a newline. A piece's
// text is fixed (text(id)), so decoding token by token gives the same text
// as decoding the whole sequence. CAF-free.
//
// Why our own encoder over libsentencepiece: that library carries its own
// copy of protobuf-lite and exports its symbols; in a process that also
// loads LibTorch (and with it libprotobuf.so.32) they clash and
// SentencePieceProcessor::Load crashes. Training stays SentencePiece's
// (spm_train); tests hold our encoder equal to spm_encode's pieces.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"

namespace rlx {

class Tokenizer {
 public:
  static constexpr std::int64_t pad = 0, eos = 1, bos = 2;

  // The character vocabulary (one shared instance).
  static std::shared_ptr<const Tokenizer> characters();
  // A subword vocabulary from spm_export_vocab's text.
  static Result<std::shared_ptr<const Tokenizer>> subword(std::string_view vocab_text, std::string name);
  // `[tokens] tokenizer`: "" for characters, else a vocabulary file's path.
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& spec);

  std::int64_t vocab() const { return static_cast<std::int64_t>(pieces_.size()); }
  const std::string& name() const { return name_; }
  bool is_subword() const { return subword_; }

  std::vector<std::int64_t> encode(std::string_view text) const;
  // Specials are dropped; decoding stops at eos.
  std::string decode(const std::vector<std::int64_t>& ids) const;
  // One token's text ("" for a special or an id outside the vocabulary).
  const std::string& text(std::int64_t id) const;

 private:
  Tokenizer() = default;
  void encode_line(std::string_view line, std::vector<std::int64_t>& out) const;

  std::string name_;
  bool subword_ = false;
  std::vector<std::string> pieces_;  // [vocab] each id's text ("" for specials)
  // subword: a piece's text -> (id, score), looked up by string_view (no
  // copy per candidate pair while encoding); the byte pieces' ids by byte.
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::pair<std::int64_t, float>, TextHash, std::equal_to<>> merges_;
  std::int64_t byte_id_[256] = {};
  std::int64_t newline_ = 0;
};

// The tokenizer a run's [tokens] names, read once per process; RLX_REQUIRE
// on failure (checked at start by check_tokenizer).
std::shared_ptr<const Tokenizer> run_tokenizer(const std::string& spec);
// A clear error when the run's tokenizer cannot be loaded.
Result<void> check_tokenizer(const std::string& spec);

}  // namespace rlx
