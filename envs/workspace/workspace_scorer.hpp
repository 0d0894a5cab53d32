// Scoring a workspace episode (envs/workspace): the hidden tests run on a
// fresh copy of the project that takes from the agent's work only its
// changes to the package's source modules (pkg/NAME.py). Test files,
// conftest.py, sitecustomize and usercustomize, .pth files, the runner and
// anything outside pkg/ are discarded and named in the reason.
//
// Only the tests' inputs enter the sandbox: a harness imports the modules,
// calls each function and prints its answers as JSON, tagged with a
// one-time nonce; the expected values stay outside and are compared here.
// Nothing inside the sandbox knows an expected value (no hidden test file,
// no reference solution, no git history, no network), so no output can
// forge a pass. Scripted cheats are tested in
// tests/envs/workspace_scorer_test.cpp. CAF-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "envs/code/sandbox.hpp"
#include "envs/scorer.hpp"
#include "envs/workspace/workspace_files.hpp"
#include "envs/workspace/workspace_task.hpp"

namespace rlx {

struct WorkspaceScore {
  // The fraction of the hidden tests the holes break (those of removed
  // bodies and of their callers: WorkspaceCase::broken) that pass, or 0
  // when any other hidden test fails (an agent that breaks what worked
  // earns nothing for the rest). The workspace as given scores 0.
  double reward = 0;
  bool solved = false;  // every hidden test passed
  std::size_t broken_passed = 0, broken_total = 0;  // tests the holes break
  std::size_t kept_passed = 0, kept_total = 0;      // tests that pass in the workspace as given
  std::vector<std::string> ignored;  // changed files scoring did not take
  std::string reason;
  SandboxRun run;
  InfraFailure failure = InfraFailure::none;  // the machinery failed: not a score
};

// Whether scoring takes a changed file: pkg/NAME.py with NAME an identifier
// that is not a test's, a hook's or the package's own (__init__).
bool scored_source(const std::string& path);

// A value as Python's json.dumps(v, separators=(",", ":")) writes it.
std::string json_value(const PyValue& v);

WorkspaceScore score_workspace(const Sandbox& sandbox, const WorkspaceTask& task, const std::vector<WorkspaceFile>& changes);

// What a score and its reason (WorkspaceScore::reason) say about why an
// episode failed, for counting: "passed", the exception the first failing
// hidden test raised ("NameError", "SyntaxError"), "wrong answer", "no
// answer", or "ended early" (the tests' process itself did not finish).
std::string score_outcome(double reward, const std::string& reason);

// The reward pool's scorer for workspace episodes: task = the task id
// ("held_out:7:2"), payload = encode_changes(the agent's changed files).
class WorkspaceScorer : public Scorer {
 public:
  static Result<std::shared_ptr<const WorkspaceScorer>> open(const SandboxOptions& options = {});
  RewardResultData score(const RewardRequestData& request) const override;

 private:
  explicit WorkspaceScorer(Sandbox sandbox) : sandbox_(std::move(sandbox)) {}
  Sandbox sandbox_;
};

}  // namespace rlx
