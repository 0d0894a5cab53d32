// The token policy's evaluator: pass@1 on a held-out task set, greedy
// decoding (the policy's single best answer), each completion scored by
// the task kind's scorer (in-process, or the sandbox for code). Single-turn
// tasks are drawn from seeds training never draws (heldout_seed() and
// up): for the kinds whose families have few variants that is not held
// out (docs/token-policy.md). Workspace tasks are held out by
// construction: held-out templates, names and constants training never
// draws (envs/workspace/workspace_task.hpp), played as whole agent
// episodes (explorers/agent_batch.hpp). CAF-free.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "envs/workspace/workspace_task.hpp"
#include "envs/scorer.hpp"
#include "messages/types.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// Training draws task seeds below this; evaluation at and above it.
constexpr std::uint64_t heldout_seed() { return 1ull << 40; }

// The evaluator's workspace tasks: held-out tasks 0..n-1 and n fresh
// training-distribution tasks (seeds heldout_seed() and up), at `difficulty`.
struct WorkspaceEvalTasks {
  std::vector<WorkspaceTask> held_out, fresh;
};
WorkspaceEvalTasks workspace_eval_tasks(int n, int difficulty);

struct TokenEvalOptions {
  std::string kind = "code";        // envs/tokens/token_tasks.hpp, or "workspace"
  int tasks = 64;
  std::int64_t max_new_tokens = 96;
  std::int64_t batch = 32;          // rows decoded together
  TokensConfig agent;               // the tokenizer; workspace: the episodes' shape (difficulty, turns, budget)
};

struct TokenEvaluation {
  double pass_at_1 = 0;             // fraction of tasks whose answer scored 1
  double mean_score = 0;            // mean fraction of tests passed
  int tasks = 0;
  int unscored = 0;                 // the scorer could not score (asked 3 times): left out of the means
  std::vector<std::string> samples; // the first few completions, for the log
  // Tasks passed and scored per family (a code task id's part before
  // ':'; the kind's name for kinds of one family).
  std::map<std::string, std::pair<int, int>> by_family;
  // Workspace episodes: the same number of fresh training-distribution
  // tasks scored beside the held-out ones (seeds training never draws, the
  // training templates), and what the episodes did, over both sets.
  double train_pass_at_1 = 0;
  double train_mean_score = 0;      // mean fraction of the broken tests passed, fresh training tasks
  int train_tasks = 0;
  // The first held-out and the first fresh training episode as played: a
  // line naming the task and how it ended, then its turns and observations.
  std::vector<std::string> episodes;
  double mean_turns = 0, mean_tool_calls = 0, mean_bad_calls = 0;
  // Share of episodes with a call that ran on a file holding a hole (the
  // README's module name copied into a path), held-out and fresh training.
  double found_hole = 0, train_found_hole = 0;
  // Share of episodes that rewrote a hole's body (rightly or not).
  double rewrote_hole = 0, train_rewrote_hole = 0;
  // How the episodes ended, counted, held-out and fresh training:
  // score_outcome's names (envs/workspace/workspace_scorer.hpp: "passed",
  // "NameError", "wrong answer", ...), "not rewritten" for a failed
  // episode that left every hole's body as it was, "not scored".
  std::map<std::string, int> outcomes, train_outcomes;
};

// "add_k 17/19, clamp 3/18, ...": by_family for a log line.
std::string family_summary(const TokenEvaluation& ev);
// "not rewritten 19, NameError 8, passed 1": outcomes, most first.
std::string outcome_summary(const std::map<std::string, int>& outcomes);

TokenEvaluation evaluate_tokens(MoETransformer& model, const Scorer& scorer, const TokenEvalOptions& options);

// The evaluator's compute: a model of the run's policy shape that takes
// each published weight set and scores it on the held-out tasks. The
// evaluator actor (actors/evaluator_actor.cpp) only decides when.
class HeldOutEvaluator {
 public:
  HeldOutEvaluator(const PolicyConfig& policy, const TokenEvalOptions& options, std::shared_ptr<const Scorer> scorer);
  // Loads `weights` and scores them (seconds of compute); an error, and no
  // score, when the weights do not fit the policy shape.
  Result<TokenEvaluation> evaluate(const WeightSetData& weights);

 private:
  MoETransformer model_{nullptr};
  TokenEvalOptions options_;
  std::shared_ptr<const Scorer> scorer_;
};

}  // namespace rlx
