// Names in edits come from the context (envs/workspace/edit_names.hpp):
// inside the body of an edit the policy writes, an identifier must be one
// the episode has shown or Python's own; strings, comments, numbers and
// call lines are free. The expert's own transcripts and drills keep to
// it on both splits, so a policy trained on them loses nothing.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/edit_names.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "envs/workspace/workspace_task.hpp"
#include "tests/envs/sandbox_fixture.hpp"

using namespace rlx;

namespace {

const auto kChars = Tokenizer::characters();

// A rule's state after `context` (not the policy's) and then `written` (the policy's), a character a token.
std::unique_ptr<TokenRule::State> after(const EditNameRule& rule, const std::string& context,
                                        const std::string& written) {
  auto s = rule.start();
  for (auto id : kChars->encode(context)) s->push(id, false);
  for (auto id : kChars->encode(written)) s->push(id, true);
  return s;
}

// Whether the rule lets the policy write character `c` next.
bool allows(const TokenRule::State& s, char c) {
  std::vector<std::uint8_t> blocked;
  if (!s.blocked(blocked)) return true;
  return blocked[static_cast<std::size_t>(kChars->encode(std::string(1, c)).at(0))] == 0;
}

// The first target token of `t` the rule blocks, as "part P: TEXT^" (empty: none).
std::string first_blocked(const EditNameRule& rule, const Tokenizer& tok, const Transcript& t) {
  auto s = rule.start();
  for (auto id : tok.encode(t.prompt)) s->push(id, false);
  std::vector<std::uint8_t> blocked;
  for (std::size_t i = 0; i < t.parts.size(); ++i) {
    const bool turn = i % 2 == 0;
    std::string so_far;
    for (auto id : tok.encode(t.parts[i])) {
      if (turn && t.target(i) && s->blocked(blocked) && blocked[static_cast<std::size_t>(id)] != 0)
        return "part " + std::to_string(i) + ": " + so_far + "^" + tok.text(id);
      so_far += tok.text(id);
      s->push(id, turn);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("inside an edit's body a name must be one the context holds, whole where it ends",
          "[envs][workspace][rule]") {
  const EditNameRule rule(kChars);
  const std::string context = "def align_tides(text):\n    \"\"\"text in upper case.\"\"\"\n";
  const std::string head = "@replace pkg/library.py align_tides\n";

  // Outside a body nothing is restricted: a tool call, free text.
  std::vector<std::uint8_t> blocked;
  CHECK_FALSE(after(rule, context, "@rea")->blocked(blocked));
  CHECK_FALSE(after(rule, context, "I will read tex")->blocked(blocked));

  // `tex` is a prefix of `text`: it may go on with `t`, not end with `.`.
  const auto tex = after(rule, context, head + "    return tex");
  CHECK(allows(*tex, 't'));
  CHECK_FALSE(allows(*tex, '.'));
  CHECK_FALSE(allows(*tex, 'z'));
  const auto text = after(rule, context, head + "    return text");
  CHECK(allows(*text, '.'));
  CHECK(allows(*text, '\n'));
  // Python's own words, and method names after a dot.
  CHECK(allows(*after(rule, context, head + "    return text.uppe"), 'r'));
  CHECK_FALSE(allows(*after(rule, context, head + "    return text.upp"), 'x'));
  CHECK(allows(*after(rule, context, head + "    return le"), 'n'));
  // A name never shown cannot start: no name in the context begins with `qu`.
  CHECK_FALSE(allows(*after(rule, context, head + "    return q"), 'u'));
  // One letter alone is a name (a comprehension's variable is bound in the body itself).
  CHECK(allows(*after(rule, context, head + "    return [q"), ' '));
  // Strings, comments and numbers are free.
  CHECK(allows(*after(rule, context, head + "    return 'q"), 'z'));
  CHECK(allows(*after(rule, context, head + "    return text  # qz"), 'z'));
  CHECK(allows(*after(rule, context, head + "    return 12"), 'x'));
  // Call lines are free: `@end` ends the body, and after it nothing is restricted.
  CHECK(allows(*after(rule, context, head + "    return text.upper()\n@e"), 'n'));
  CHECK_FALSE(after(rule, context, head + "    return text.upper()\n@end\n")->blocked(blocked));
  // An observation ends the turn and its body; its names join the context.
  const auto next = after(rule, context + "[out]\nerror: no quux\n[end]\n", "");
  CHECK_FALSE(next->blocked(blocked));
  const auto q = after(rule, context + "error: no quux\n", head + "    return qu");
  CHECK(allows(*q, 'u'));
  // A name the policy wrote outside the rule (a scripted turn) leaves its word unchecked, not every token blocked.
  const auto scripted = after(rule, context, head + "    return tex");
  scripted->push(kChars->encode(".")[0], true);
  CHECK(allows(*scripted, 'u'));
}

TEST_CASE("the expert's transcripts and drills keep to the names their context holds, on both splits",
          "[envs][workspace][rule][sandbox]") {
  const auto tok = Tokenizer::load(std::string(RLX_SOURCE_DIR) + "/examples/agent-bpe1024.vocab");
  REQUIRE(tok);
  const EditNameRule rule(*tok);
  const Sandbox box = test::open_sandbox();
  int drills = 0, transcripts = 0;
  std::vector<std::uint8_t> blocked;
  for (const TaskSplit split : {TaskSplit::train, TaskSplit::held_out})
    for (int difficulty = 0; difficulty <= 2; ++difficulty)
      for (std::uint64_t seed = 0; seed < 12; ++seed) {
        const WorkspaceTask task = make_workspace_task(split, seed, difficulty);
        INFO(task.id);
        if (seed < 2) {
          const Transcript t = expert_transcript(task, box);
          REQUIRE(t.end == EpisodeEnd::submitted);
          CHECK(first_blocked(rule, **tok, t) == "");
          ++transcripts;
        }
        for (std::size_t f = 0; f < task.functions.size(); ++f)
          for (const bool focused : {false, true}) {
            const Transcript d = expert_drill(single_hole_task(task, f), box, focused);
            CHECK(first_blocked(rule, **tok, d) == "");
            ++drills;
          }
      }
  CHECK(transcripts == 12);
  CHECK(drills > 300);
}
