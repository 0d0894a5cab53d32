// The token policy's vocabulary. Three kinds, one interface:
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
//   - tokenizer.json (a path ending in .json): a Hugging Face byte-level
//     BPE tokenizer (envs/tokens/hf_tokenizer.hpp), the vocabulary of a
//     model brought in with `[policy] init = "hf:DIR"` (docs/hf-models.md).
//     End of sequence is <|im_end|> (the end of a chat turn; else
//     <|endoftext|>, else </s>), padding <|endoftext|> (else <pad>, else
//     the end of sequence); the file's own ids, so a checkpoint's
//     embeddings line up.
// The specials' ids belong to the vocabulary: pad(), eos() (characters and
// SentencePiece: 0 and 1).
// Text is encoded in parts (a prompt, a turn, an observation each on its
// own), so a piece never spans two parts (nor, for the first two kinds, a
// newline). A piece's text is fixed (text(id); a tokenizer.json token's
// bytes, not always a whole UTF-8 character), so decoding token by token
// gives the same bytes as decoding the whole sequence. CAF-free.
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

class HfTokenizer;

class Tokenizer {
 public:
  // The character vocabulary (one shared instance).
  static std::shared_ptr<const Tokenizer> characters();
  // A subword vocabulary from spm_export_vocab's text.
  static Result<std::shared_ptr<const Tokenizer>> subword(std::string_view vocab_text, std::string name);
  // A tokenizer.json's vocabulary.
  static Result<std::shared_ptr<const Tokenizer>> hugging_face(std::shared_ptr<const HfTokenizer> hf);
  // `[tokens] tokenizer`: "" for characters, a path ending in .json for a
  // tokenizer.json, else a SentencePiece vocabulary file's path.
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& spec);

  std::int64_t vocab() const { return static_cast<std::int64_t>(pieces_.size()); }
  const std::string& name() const { return name_; }
  bool is_subword() const { return subword_; }
  std::int64_t pad() const { return pad_; }
  std::int64_t eos() const { return eos_; }
  // The tokenizer.json behind this vocabulary (null for the other kinds).
  const HfTokenizer* hugging_face() const { return hf_.get(); }

  // `specials` (tokenizer.json only): special tokens written in the text,
  // such as "<|im_start|>", become their ids (a chat template's rendering);
  // false: they are plain text (a task's prompt, a tool's output).
  std::vector<std::int64_t> encode(std::string_view text, bool specials = false) const;
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
  std::int64_t pad_ = 0, eos_ = 1;
  std::shared_ptr<const HfTokenizer> hf_;
};

// The tokenizer a run's [tokens] names, read once per process; RLX_REQUIRE
// on failure (checked at start by check_tokenizer).
std::shared_ptr<const Tokenizer> run_tokenizer(const std::string& spec);
// A clear error when the run's tokenizer cannot be loaded.
Result<void> check_tokenizer(const std::string& spec);

}  // namespace rlx
