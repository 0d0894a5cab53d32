#include "envs/tokens/hf_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <climits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "core/files.hpp"
#include "core/json_int.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;

// GPT-2's map of bytes to printable characters (bytes_to_unicode): the
// printable Latin-1 bytes stand for themselves, the others for 256, 257, ...
struct ByteChars {
  std::array<std::string, 256> utf8;     // byte -> its character, UTF-8
  std::array<int, 324> byte_of{};        // code point -> byte (-1: none)
  ByteChars() {
    byte_of.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : next++;
      byte_of[static_cast<std::size_t>(cp)] = b;
      utf8[static_cast<std::size_t>(b)] = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                                                    : std::string{static_cast<char>(0xC0 | (cp >> 6)),
                                                                  static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
};
const ByteChars& byte_chars() {
  static const ByteChars t;
  return t;
}

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The pattern for ICU: `\s` and `\S` as Unicode White_Space (ICU's own \s
// leaves out U+000B and U+0085, which Oniguruma's includes).
std::string icu_pattern(std::string_view p) {
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\' || i + 1 == p.size()) {
      out += p[i];
      continue;
    }
    const char c = p[++i];
    if (c == 's') out += "\\p{White_Space}";
    else if (c == 'S') out += "\\P{White_Space}";
    else (out += '\\') += c;
  }
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// The UTF-8 characters of `s` (a byte-level token: each character 1-2 bytes).
std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

struct HfTokenizer::Impl {
  std::unique_ptr<icu::RegexPattern> split;  // null: no pre-tokenizer split
};

HfTokenizer::HfTokenizer() : impl_(std::make_unique<Impl>()) {}
HfTokenizer::~HfTokenizer() = default;

Result<std::shared_ptr<const HfTokenizer>> HfTokenizer::load(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse(*text, path);
}

Result<std::shared_ptr<const HfTokenizer>> HfTokenizer::parse(std::string_view json_text, std::string name) {
  const auto fail = [&](const std::string& why) { return make_error(Errc::invalid_field, name + ": " + why); };
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  std::shared_ptr<HfTokenizer> t(new HfTokenizer());
  t->name_ = std::move(name);
  try {
    // The model: byte-level BPE.
    const auto& m = j.at("model");
    if (m.value("type", std::string()) != "BPE") return fail("model.type must be \"BPE\" (a byte-level BPE tokenizer)");
    if (m.value("byte_fallback", false)) return fail("model.byte_fallback is not supported (a SentencePiece-style BPE)");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(k) && !m[k].is_null() && !m[k].get<std::string>().empty())
        return fail(fmt::format("model.{} is not supported", k));
    t->ignore_merges_ = m.value("ignore_merges", false);
    const auto& vocab = m.at("vocab");
    if (!vocab.is_object() || vocab.empty()) return fail("model.vocab must be an object of tokens and ids");
    // An id must be an integer >= 0 (a float such as 2e57 is not one).
    const auto json_id = [](const json& v) { return json_int64(v).value_or(-1); };
    std::int64_t top = -1;
    for (const auto& [tok, id_json] : vocab.items()) {
      const auto id = json_id(id_json);
      if (id < 0) return fail(fmt::format("model.vocab: token {} has id {}, not an integer >= 0", tok, id_json.dump()));
      top = std::max(top, id);
    }
    for (const auto& a : j.value("added_tokens", json::array())) top = std::max(top, json_id(a.at("id")));
    if (top >= (1 << 24)) return fail(fmt::format("an id of {} is past the 2^24 this reader takes", top));
    t->tokens_.assign(static_cast<std::size_t>(top + 1), std::string());
    t->kind_.assign(t->tokens_.size(), Kind::learned);
    std::vector<bool> taken(t->tokens_.size(), false);
    for (const auto& [tok, id_json] : vocab.items()) {
      const auto id = json_id(id_json);
      if (taken[static_cast<std::size_t>(id)]) return fail(fmt::format("model.vocab: id {} is given twice", id));
      taken[static_cast<std::size_t>(id)] = true;
      t->tokens_[static_cast<std::size_t>(id)] = tok;
      t->ids_.emplace(tok, id);
    }
    for (const auto& b : byte_chars().utf8)
      if (!t->ids_.count(b)) return fail("model.vocab lacks a byte-level character: not a byte-level BPE vocabulary");
    std::int32_t rank = 0;
    for (const auto& merge : m.at("merges")) {
      std::string key;
      if (merge.is_string()) key = merge.get<std::string>();
      else if (merge.is_array() && merge.size() == 2) key = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
      else return fail(fmt::format("model.merges[{}] must be \"left right\" or [left, right]", rank));
      t->ranks_.emplace(std::move(key), rank++);
    }
    // Added tokens.
    for (const auto& a : j.value("added_tokens", json::array())) {
      Added x{a.at("content").get<std::string>(), json_id(a.at("id")), a.value("special", false)};
      if (x.content.empty() || x.id < 0) return fail("added_tokens: a token needs content and an id >= 0");
      for (const char* k : {"lstrip", "rstrip", "single_word"})
        if (a.value(k, false)) return fail(fmt::format("added token {}: {} is not supported", x.content, k));
      const auto i = static_cast<std::size_t>(x.id);
      if (taken[i] && t->tokens_[i] != x.content)
        return fail(fmt::format("added token {} takes id {}, which the vocabulary gives {}", x.content, x.id, t->tokens_[i]));
      taken[i] = true;
      t->tokens_[i] = x.content;
      t->kind_[i] = x.special ? Kind::special : Kind::added;
      t->ids_[x.content] = x.id;
      t->added_.push_back(std::move(x));
    }
    std::stable_sort(t->added_.begin(), t->added_.end(),
                     [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
    // Normaliser: none or NFC.
    const auto normaliser = [&](const json& n) -> Result<void> {
      const auto type = n.value("type", std::string());
      if (type == "NFC") t->nfc_ = true;
      else return fail("normalizer " + type + " is not supported (none or NFC)");
      return {};
    };
    if (const auto& n = j.value("normalizer", json()); !n.is_null()) {
      if (n.value("type", std::string()) == "Sequence") {
        for (const auto& each : n.at("normalizers"))
          if (auto r = normaliser(each); !r) return r.error();
      } else if (auto r = normaliser(n); !r) {
        return r.error();
      }
    }
    // Pre-tokenizer: [Split(regex, Isolated), ByteLevel(no regex)] or ByteLevel(GPT-2's regex).
    std::vector<json> steps;
    const auto& p = j.at("pre_tokenizer");
    if (p.value("type", std::string()) == "Sequence") steps.assign(p.at("pretokenizers").begin(), p.at("pretokenizers").end());
    else steps.push_back(p);
    std::string pattern;
    bool byte_level = false;
    for (const auto& s : steps) {
      const auto type = s.value("type", std::string());
      if (type == "Split" && !byte_level && pattern.empty()) {
        if (s.value("behavior", std::string()) != "Isolated" || s.value("invert", false))
          return fail("pre_tokenizer Split: only behavior Isolated, not inverted, is supported");
        if (!s.at("pattern").contains("Regex")) return fail("pre_tokenizer Split: only a Regex pattern is supported");
        pattern = s.at("pattern").at("Regex").get<std::string>();
      } else if (type == "ByteLevel" && !byte_level) {
        byte_level = true;
        t->add_prefix_space_ = s.value("add_prefix_space", false);
        if (s.value("use_regex", true)) {
          if (!pattern.empty()) return fail("pre_tokenizer: a Split and a ByteLevel regex both: not supported");
          pattern = kGpt2Pattern;
        }
      } else {
        return fail("pre_tokenizer " + type + " is not supported here (Split then ByteLevel, or ByteLevel)");
      }
    }
    if (!byte_level) return fail("pre_tokenizer: no ByteLevel step: not a byte-level BPE tokenizer");
    if (const auto& d = j.value("decoder", json()); !d.is_null() && d.value("type", std::string()) != "ByteLevel")
      return fail("decoder " + d.value("type", std::string()) + " is not supported (ByteLevel)");
    if (!pattern.empty()) {
      UErrorCode status = U_ZERO_ERROR;
      UParseError where{};
      t->impl_->split.reset(
          icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_pattern(pattern)), 0, where, status));
      if (U_FAILURE(status))
        return fail(fmt::format("the pre-tokenizer's regex does not compile ({} at offset {}): {}", u_errorName(status),
                                where.offset, pattern));
    }
  } catch (const json::exception& e) {
    return fail(std::string("a field is missing or of the wrong type: ") + e.what());
  }
  return std::shared_ptr<const HfTokenizer>(std::move(t));
}

std::vector<std::int64_t> HfTokenizer::encode(std::string_view text, bool specials) const {
  std::vector<std::int64_t> out;
  std::size_t from = 0;
  if (specials && !added_.empty())
    for (std::size_t i = 0; i < text.size();) {
      const auto hit = std::find_if(added_.begin(), added_.end(), [&](const Added& a) {
        return text.compare(i, a.content.size(), a.content) == 0;
      });
      if (hit == added_.end()) {
        ++i;
        continue;
      }
      encode_text(text.substr(from, i - from), out);
      out.push_back(hit->id);
      i += hit->content.size();
      from = i;
    }
  encode_text(text.substr(from), out);
  return out;
}

void HfTokenizer::encode_text(std::string_view text, std::vector<std::int64_t>& out) const {
  if (text.empty()) return;
  std::string normal(text);
  if (nfc_ && !is_ascii(normal)) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_SUCCESS(status)) {
      const icu::UnicodeString n = nfc->normalize(icu::UnicodeString::fromUTF8(normal), status);
      if (U_SUCCESS(status)) {
        normal.clear();
        n.toUTF8String(normal);
      }
    }
  }
  if (add_prefix_space_ && normal.front() != ' ') normal.insert(normal.begin(), ' ');
  if (!impl_->split) return encode_piece(normal, out);
  // The regex's matches and the stretches between them are the pieces (Isolated).
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(normal);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(impl_->split->matcher(u, status));
  std::int32_t at = 0;
  std::string piece;
  const auto emit = [&](std::int32_t a, std::int32_t b) {
    if (b <= a) return;
    piece.clear();
    u.tempSubStringBetween(a, b).toUTF8String(piece);
    encode_piece(piece, out);
  };
  while (U_SUCCESS(status) && m->find(status)) {
    const std::int32_t s = m->start(status), e = m->end(status);
    if (U_FAILURE(status) || e <= s) continue;
    emit(at, s);
    emit(s, e);
    at = e;
  }
  emit(at, u.length());
}

void HfTokenizer::encode_piece(std::string_view piece, std::vector<std::int64_t>& out) const {
  const auto& bc = byte_chars();
  std::vector<std::string> sym;
  sym.reserve(piece.size());
  std::string whole;
  for (char c : piece) {
    sym.push_back(bc.utf8[static_cast<unsigned char>(c)]);
    whole += sym.back();
  }
  if (ignore_merges_)
    if (auto it = ids_.find(whole); it != ids_.end()) return out.push_back(it->second);
  std::string key;
  while (sym.size() > 1) {
    std::int32_t best = INT32_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
      key.assign(sym[i]).append(" ").append(sym[i + 1]);
      if (auto r = ranks_.find(key); r != ranks_.end() && r->second < best) {
        best = r->second;
        at = i;
      }
    }
    if (best == INT32_MAX) break;
    const std::string a = sym[at], b = sym[at + 1];
    std::vector<std::string> next;
    next.reserve(sym.size());
    for (std::size_t i = 0; i < sym.size();) {
      if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
        next.push_back(a + b);
        i += 2;
      } else {
        next.push_back(std::move(sym[i++]));
      }
    }
    sym = std::move(next);
  }
  for (const auto& s : sym) {
    if (auto it = ids_.find(s); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (const auto& c : utf8_chars(s)) out.push_back(ids_.at(c));  // a merge whose result is no token
  }
}

std::string HfTokenizer::token_bytes(std::int64_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const auto& t = tokens_[static_cast<std::size_t>(id)];
  if (kind_[static_cast<std::size_t>(id)] != Kind::learned) return t;  // an added token: its content
  std::string out;
  const auto& bc = byte_chars();
  for (std::size_t i = 0; i < t.size();) {
    const auto c = static_cast<unsigned char>(t[i]);
    int cp = c;
    std::size_t n = 1;
    if (c >= 0xC0 && c < 0xE0 && i + 1 < t.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(t[i + 1]) & 0x3F);
      n = 2;
    }
    const int b = cp < static_cast<int>(bc.byte_of.size()) ? bc.byte_of[static_cast<std::size_t>(cp)] : -1;
    if (b >= 0) out += static_cast<char>(b);
    i += n;
  }
  return out;
}

std::string HfTokenizer::decode(const std::vector<std::int64_t>& ids, bool skip_special) const {
  std::string out;
  for (auto id : ids)
    if (!(skip_special && is_special(id))) out += token_bytes(id);
  return out;
}

std::optional<std::int64_t> HfTokenizer::id_of(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

bool HfTokenizer::is_special(std::int64_t id) const {
  return id >= 0 && id < vocab_size() && kind_[static_cast<std::size_t>(id)] == Kind::special;
}

}  // namespace rlx
