// Tasks for the token policy (envs/tokens): a prompt to complete and a
// task id a Scorer (envs/scorer.hpp) turns, with the completion, into the
// reward. Two kinds:
//   "arithmetic": "a+b=" / "a-b=" with small operands; the answer is
//     scored in-process (ArithmeticScorer, exact match).
//   "code": a code task (envs/code/code_tasks.hpp) shown as its spec and
//     one visible example; the completion is the program, scored by the
//     hidden tests in the sandbox (CodeScorer, through the reward pool).
// A task is drawn from its seed alone; `reference` is a correct
// completion (the supervised data). CAF-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "envs/tokens/tokenizer.hpp"

namespace rlx {

struct TokenTask {
  std::string id;         // what the scorer needs besides the completion
  std::string prompt;     // shown to the policy
  std::string reference;  // a correct completion
  // A line of the scorer's hint form that holds for the task (code: its
  // second visible example; arithmetic: "12+7=19"): `rlx sft` shows it in
  // half its prompts, so that the policy learns to read a hint.
  std::string hint;
};

const std::vector<std::string>& token_task_kinds();

// The scorer kind ([reward] scorer) of a task kind: "arithmetic", "code"
// or "workspace" (agent episodes, explorers/agent_batch.hpp).
std::string scorer_for(std::string_view kind);

// Task `seed` of `kind`. Errc::config_unknown_name for an unknown kind.
Result<TokenTask> make_token_task(std::string_view kind, std::uint64_t seed);

// The prompt a hint's teacher sees (hint distillation, docs/token-policy.md):
// the hint's tokens right after the prompt's last line break, or before
// the prompt when it has none. A code prompt ends with its visible example
// line, so the hint (a failed test in the same form) is a second one; an
// arithmetic hint ("12+7=19") precedes its question.
std::vector<std::int64_t> hinted_prompt(const std::vector<std::int64_t>& prompt, std::string_view hint,
                                        const Tokenizer& tokenizer);

}  // namespace rlx
