#include "envs/workspace/edit_names.hpp"

#include <utility>

#include "core/error.hpp"

namespace rlx {

namespace {

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool digit(char c) { return c >= '0' && c <= '9'; }

// The names an episode has shown, with Python's own words.
class Names {
 public:
  Names() {
    for (auto w : EditNameRule::python_words()) names_.emplace(w);
  }
  void add(const std::string& w) { names_.insert(w); }
  // One letter alone is a name: a comprehension's variable is bound in the body itself.
  bool has(const std::string& w) const { return w.size() == 1 || names_.count(w) != 0; }
  bool has_prefix(const std::string& w) const {
    if (w.size() == 1) return true;
    const auto it = names_.lower_bound(w);
    return it != names_.end() && it->starts_with(w);
  }

 private:
  std::set<std::string, std::less<>> names_;
};

// Where a body's text stands, character by character.
struct Lex {
  char quote = 0;          // inside a string literal opened by this quote
  bool escape = false;     // the last character was a backslash inside it
  bool free_line = false;  // the rest of the line is not checked: a comment, or a line that starts with '@'
  bool line_start = true;  // only spaces on this line so far
  bool unchecked = false;  // the word under way is not checked: a number, or one the rule did not write
  std::string word;        // the identifier under way

  // Whether the word under way may end here.
  bool end_word(const Names& names) {
    const bool ok = word.empty() || unchecked || names.has(word);
    word.clear();
    unchecked = false;
    return ok;
  }
  // Takes `c`; false when it leaves a name no context holds.
  bool take(char c, const Names& names) {
    if (c == '\n') {
      const bool ok = free_line || quote != 0 || end_word(names);
      word.clear();
      unchecked = false;
      escape = false;
      free_line = false;
      line_start = true;
      return ok;
    }
    if (free_line) return true;
    if (quote != 0) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == quote) quote = 0;
      return true;
    }
    if (line_start && (c == ' ' || c == '\t')) return true;
    if (line_start && c == '@') {
      free_line = true;
      line_start = false;
      return true;
    }
    line_start = false;
    if (word_char(c)) {
      if (word.empty()) unchecked = digit(c);
      word += c;
      return unchecked || names.has_prefix(word);
    }
    const bool ok = end_word(names);
    if (c == '#') free_line = true;
    else if (c == '\'' || c == '"') quote = c;
    return ok;
  }
};

class NameState : public TokenRule::State {
 public:
  explicit NameState(const std::vector<std::string>& texts) : texts_(&texts) {}

  void push(std::int64_t token, bool generated) override {
    const auto& text = token >= 0 && static_cast<std::size_t>(token) < texts_->size()
                           ? (*texts_)[static_cast<std::size_t>(token)] : empty_;
    if (!generated) {  // context: the turn (and any body) is over
      in_body_ = false;
      line_.clear();
    }
    for (const char c : text) {
      collect(c);
      if (!generated) continue;
      if (in_body_ && !lex_.take(c, names_)) {
        // A token the rule would have blocked (a scripted turn, a run
        // without the rule): its word is left unchecked, not held against
        // every token after it.
        lex_.unchecked = word_char(c);
      }
      if (c != '\n') {
        line_ += c;
        continue;
      }
      if (!in_body_ && (line_.starts_with("@replace ") || line_.starts_with("@write "))) {
        in_body_ = true;
        lex_ = Lex{};
      } else if (in_body_ && trimmed(line_) == "@end") {
        in_body_ = false;
      }
      line_.clear();
    }
  }

  bool blocked(std::vector<std::uint8_t>& out) const override {
    if (!in_body_) return false;
    const auto V = texts_->size();
    out.assign(V, 0);
    for (std::size_t v = 0; v < V; ++v) {
      const auto& text = (*texts_)[v];
      if (text.empty()) continue;
      Lex lex = lex_;
      for (const char c : text)
        if (!lex.take(c, names_)) {
          out[v] = 1;
          break;
        }
    }
    return true;
  }

 private:
  static std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
    return s;
  }
  // Every identifier of the sequence's text becomes a name the context has.
  void collect(char c) {
    if (word_char(c)) {
      word_ += c;
      return;
    }
    if (!word_.empty() && !digit(word_[0])) names_.add(word_);
    word_.clear();
  }

  const std::vector<std::string>* texts_;  // the rule's: each token's text
  Names names_;
  std::string word_;  // the identifier being collected
  std::string line_;  // the policy's line under way
  bool in_body_ = false;
  Lex lex_;
  std::string empty_;
};

}  // namespace

EditNameRule::EditNameRule(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {
  RLX_REQUIRE(tokenizer_ != nullptr);
  texts_.reserve(static_cast<std::size_t>(tokenizer_->vocab()));
  for (std::int64_t id = 0; id < tokenizer_->vocab(); ++id) texts_.push_back(tokenizer_->text(id));
}

std::unique_ptr<TokenRule::State> EditNameRule::start() const { return std::make_unique<NameState>(texts_); }

const std::vector<std::string_view>& EditNameRule::python_words() {
  static const std::vector<std::string_view> words = {
      // keywords
      "False", "None", "True", "and", "as", "assert", "break", "class", "continue", "def", "del", "elif", "else",
      "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or",
      "pass", "raise", "return", "try", "while", "with", "yield",
      // builtins
      "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "int", "isinstance", "len",
      "list", "map", "max", "min", "print", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple",
      "zip", "ValueError", "TypeError", "KeyError", "IndexError", "NotImplementedError",
      // methods of str, list and dict
      "append", "capitalize", "count", "endswith", "extend", "find", "get", "index", "insert", "items", "join",
      "keys", "lower", "lstrip", "pop", "remove", "replace", "reverse", "rstrip", "sort", "split", "startswith",
      "strip", "title", "upper", "values"};
  return words;
}

std::shared_ptr<const TokenRule> decoding_rule(const TokensConfig& tokens) {
  if (tokens.edit_names != "context") return nullptr;
  return std::make_shared<const EditNameRule>(run_tokenizer(tokens.tokenizer));
}

}  // namespace rlx
