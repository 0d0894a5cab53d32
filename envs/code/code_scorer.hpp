// Scores a program for a code task (envs/code/code_tasks.hpp): the reward
// request's task is the task id, its payload the program (Python source
// defining the task's function). The hidden tests are rebuilt from the id
// and the program runs against them in the sandbox; the score is the
// fraction passed, with the reason ("passed 6 of 8", "timed out", ...).
// An unknown task id is not a score: ok = false, failure bad_request, with
// the reason; nor is a run whose sandbox failed (failure says which).
#pragma once

#include <memory>

#include "envs/code/sandbox.hpp"
#include "envs/scorer.hpp"

namespace rlx {

class CodeScorer : public Scorer {
 public:
  // Fails (clear error) when the sandbox cannot run here: no silent
  // unsandboxed fallback.
  static Result<std::shared_ptr<const CodeScorer>> open(const SandboxOptions& options = {});
  RewardResultData score(const RewardRequestData& request) const override;

 private:
  explicit CodeScorer(Sandbox sandbox) : sandbox_(std::move(sandbox)) {}
  Sandbox sandbox_;
};

}  // namespace rlx
