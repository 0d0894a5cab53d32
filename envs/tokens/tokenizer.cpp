#include "envs/tokens/tokenizer.hpp"

#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <queue>

#include <fmt/format.h>

#include "core/files.hpp"
#include "envs/tokens/hf_tokenizer.hpp"

namespace rlx {

namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space
constexpr std::string_view kSpecials[] = {"<pad>", "</s>", "<s>", "<unk>"};

std::string unescape_spaces(std::string_view piece) {
  std::string out;
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpace.size()) == kSpace) {
      out.push_back(' ');
      i += kSpace.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

// "<0xNN>" -> NN; -1 when the piece is not a byte piece.
int byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>') return -1;
  int value = 0;
  const auto r = std::from_chars(piece.data() + 3, piece.data() + 5, value, 16);
  return r.ec == std::errc() && r.ptr == piece.data() + 5 ? value : -1;
}

// The length of the UTF-8 character starting with `lead` (1 for a byte
// that starts none: it stands alone and is spelled as a byte piece).
std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xe) return 3;
  if ((lead >> 3) == 0x1e) return 4;
  return 1;
}

Error vocab_error(const std::string& name, std::size_t line, const std::string& what) {
  return make_error(Errc::config_range, fmt::format("tokenizer {}: line {}: {}", name, line, what));
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::characters() {
  static const std::shared_ptr<const Tokenizer> chars = [] {
    std::shared_ptr<Tokenizer> t(new Tokenizer());
    t->name_ = "characters";
    t->pieces_.assign(3, "");
    for (int c = 32; c <= 126; ++c) t->pieces_.emplace_back(1, static_cast<char>(c));
    t->pieces_.emplace_back("\n");
    return t;
  }();
  return chars;
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::subword(std::string_view vocab_text, std::string name) {
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->name_ = std::move(name);
  t->subword_ = true;
  std::fill(std::begin(t->byte_id_), std::end(t->byte_id_), -1);
  std::size_t line_no = 0;
  while (!vocab_text.empty()) {
    const auto end = vocab_text.find('\n');
    const auto line = vocab_text.substr(0, end);
    vocab_text = end == std::string_view::npos ? std::string_view() : vocab_text.substr(end + 1);
    ++line_no;
    if (line.empty() && vocab_text.empty()) break;
    const auto tab = line.rfind('\t');
    if (tab == std::string_view::npos || tab == 0)
      return vocab_error(t->name_, line_no, "not \"PIECE<tab>SCORE\" (spm_export_vocab's format)");
    const auto piece = line.substr(0, tab);
    const std::string score_text(line.substr(tab + 1));
    char* score_end = nullptr;
    const float score = std::strtof(score_text.c_str(), &score_end);
    if (score_text.empty() || *score_end != '\0') return vocab_error(t->name_, line_no, "a score that is not a number");
    const auto id = static_cast<std::int64_t>(t->pieces_.size());
    if (id < 4) {
      if (piece != kSpecials[id])
        return vocab_error(t->name_, line_no,
                           fmt::format("id {} must be {} (train with --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3)", id,
                                       kSpecials[id]));
      t->pieces_.emplace_back();
      continue;
    }
    if (const int b = byte_piece(piece); b >= 0) {
      if (t->byte_id_[b] >= 0) return vocab_error(t->name_, line_no, "a byte piece twice");
      t->byte_id_[b] = id;
      t->pieces_.emplace_back(1, static_cast<char>(b));
      continue;
    }
    std::string text = unescape_spaces(piece);
    if (!t->merges_.emplace(text, std::make_pair(id, score)).second)
      return vocab_error(t->name_, line_no, "a piece twice");
    t->pieces_.push_back(std::move(text));
  }
  if (t->pieces_.size() < 4) return vocab_error(t->name_, line_no, "fewer than the four special pieces");
  for (int b = 0; b < 256; ++b)
    if (t->byte_id_[b] < 0)
      return make_error(Errc::config_range, fmt::format("tokenizer {}: no byte piece <0x{:02X}> (train with --byte_fallback=true)",
                                                        t->name_, b));
  t->newline_ = t->byte_id_['\n'];
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::hugging_face(std::shared_ptr<const HfTokenizer> hf) {
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  t->name_ = hf->name();
  t->subword_ = true;
  const auto first_of = [&](std::initializer_list<std::string_view> names) -> std::int64_t {
    for (const auto n : names)
      if (const auto id = hf->id_of(n)) return *id;
    return -1;
  };
  t->eos_ = first_of({"<|im_end|>", "<|endoftext|>", "</s>", "<|end_of_text|>"});
  if (t->eos_ < 0)
    return make_error(Errc::config_range, "tokenizer " + t->name_ +
                                              ": no end-of-sequence token (<|im_end|>, <|endoftext|>, </s> or <|end_of_text|>)");
  t->pad_ = first_of({"<|endoftext|>", "<pad>", "<|finetune_right_pad_id|>"});
  if (t->pad_ < 0) t->pad_ = t->eos_;
  t->pieces_.resize(static_cast<std::size_t>(hf->vocab_size()));
  for (std::int64_t id = 0; id < hf->vocab_size(); ++id)
    if (!hf->is_special(id)) t->pieces_[static_cast<std::size_t>(id)] = hf->token_bytes(id);
  t->hf_ = std::move(hf);
  return std::shared_ptr<const Tokenizer>(std::move(t));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& spec) {
  if (spec.empty()) return characters();
  if (spec.size() > 5 && spec.ends_with(".json")) {
    auto hf = HfTokenizer::load(spec);
    if (!hf) return hf.error();
    return hugging_face(std::move(*hf));
  }
  auto text = read_text_file(spec);
  if (!text) return make_error(Errc::config_missing, "tokenizer " + spec + ": " + text.error().message);
  return subword(*text, spec);
}

const std::string& Tokenizer::text(std::int64_t id) const {
  static const std::string none;
  return id >= 0 && id < vocab() ? pieces_[static_cast<std::size_t>(id)] : none;
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text, bool specials) const {
  if (hf_) return hf_->encode(text, specials);
  std::vector<std::int64_t> ids;
  if (!subword_) {
    ids.reserve(text.size());
    for (const unsigned char c : text) {
      if (c == '\n') ids.push_back(vocab() - 1);
      else if (c >= 32 && c <= 126) ids.push_back(3 + (c - 32));
      else ids.push_back(3);  // ' '
    }
    return ids;
  }
  for (;;) {
    const auto end = text.find('\n');
    encode_line(text.substr(0, end), ids);
    if (end == std::string_view::npos) break;
    ids.push_back(newline_);
    text = text.substr(end + 1);
  }
  return ids;
}

// SentencePiece's BPE: start from characters, merge the adjacent pair whose
// joined text is the piece with the highest score (the leftmost among
// equals) until no pair joins into a piece.
void Tokenizer::encode_line(std::string_view line, std::vector<std::int64_t>& out) const {
  struct Symbol {
    std::size_t start, size;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (std::size_t i = 0; i < line.size();) {
    const auto n = std::min(utf8_length(static_cast<unsigned char>(line[i])), line.size() - i);
    symbols.push_back({i, n, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
    i += n;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Pair {
    float score;
    int left, right;
    std::size_t size;
  };
  const auto worse = [](const Pair& a, const Pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> agenda(worse);
  const auto propose = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const auto& l = symbols[static_cast<std::size_t>(left)];
    const auto& r = symbols[static_cast<std::size_t>(right)];
    const auto it = merges_.find(line.substr(l.start, l.size + r.size));
    if (it != merges_.end()) agenda.push({it->second.second, left, right, l.size + r.size});
  };
  for (std::size_t i = 1; i < symbols.size(); ++i) propose(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    auto& l = symbols[static_cast<std::size_t>(top.left)];
    auto& r = symbols[static_cast<std::size_t>(top.right)];
    if (l.size == 0 || r.size == 0 || l.size + r.size != top.size || l.next != top.right) continue;  // stale
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = top.left;
    propose(l.prev, top.left);
    propose(top.left, l.next);
  }
  for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    const auto& s = symbols[static_cast<std::size_t>(i)];
    const auto piece = line.substr(s.start, s.size);
    if (const auto it = merges_.find(piece); it != merges_.end()) {
      out.push_back(it->second.first);
    } else {
      for (const unsigned char c : piece) out.push_back(byte_id_[c]);
    }
  }
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::string s;
  for (const auto id : ids) {
    if (id == eos_) break;
    s += text(id);
  }
  return s;
}

std::shared_ptr<const Tokenizer> run_tokenizer(const std::string& spec) {
  // Read once per process: the explorers, the evaluator and the learner share it.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Tokenizer>> loaded;
  const std::lock_guard lock(mutex);
  if (const auto it = loaded.find(spec); it != loaded.end()) return it->second;
  auto t = Tokenizer::load(spec);
  RLX_REQUIRE(t.ok(), t.error().message);  // checked at start (check_tokenizer)
  return loaded[spec] = *t;
}

Result<void> check_tokenizer(const std::string& spec) {
  auto t = Tokenizer::load(spec);
  if (!t) return t.error();
  return {};
}

}  // namespace rlx
