// Names in an edit come from the context (`[tokens] edit_names =
// "context"`, docs/workspace.md "Names in edits"): a decoding rule
// (policy/token_rule.hpp) under which, inside the body of a `@replace` or
// `@write` call the policy writes, every Python identifier is one the
// episode has shown (in the prompt, an observation or the policy's own
// earlier text) or a word of Python's own (keywords, builtins, the methods
// of str, list and dict), or a single letter (a comprehension's variable,
// bound in the body itself). Each token the policy writes there must keep
// the identifier under way a prefix of such a name, and an identifier
// must be whole where it ends: `te`, `x` cannot be followed by `.` when
// the context knows `text` and no `tex`. String literals, comments,
// numbers and the call lines themselves (`@replace ...`, `@end`) are free.
//
// Why: a small policy that copies names piece by piece slips inside them
// (`tex.upper()` for `text.upper()`), and a held-out task's names are
// ones training never drew, so it cannot recall them. The rule does not
// choose the name: among the names the episode shows, the policy's
// distribution does; it only takes away names that exist nowhere, which
// fail as a NameError whatever else the edit gets right.
//
// What the rule sees is text: each token's text from the tokenizer. A
// body starts after a line the policy wrote that begins `@replace ` or
// `@write `, and ends at its `@end` line or at any token it did not write
// (an observation: the turn is over). CAF-free.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "policy/token_rule.hpp"

namespace rlx {

class EditNameRule : public TokenRule {
 public:
  explicit EditNameRule(std::shared_ptr<const Tokenizer> tokenizer);
  std::int64_t vocab() const override { return static_cast<std::int64_t>(texts_.size()); }
  std::unique_ptr<State> start() const override;

  // Python's own words the rule always allows (tests).
  static const std::vector<std::string_view>& python_words();

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<std::string> texts_;  // [vocab] each token's text ("" for a special: never blocked)
};

// The decoding rule a run's [tokens] names (edit_names = "context": an
// EditNameRule over the run's tokenizer), or null ("free").
std::shared_ptr<const TokenRule> decoding_rule(const TokensConfig& tokens);

}  // namespace rlx
