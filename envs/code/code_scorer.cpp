#include "envs/code/code_scorer.hpp"

#include "envs/code/code_tasks.hpp"
#include "envs/code/program_tests.hpp"

namespace rlx {

Result<std::shared_ptr<const CodeScorer>> CodeScorer::open(const SandboxOptions& options) {
  auto sandbox = Sandbox::open(options);
  if (!sandbox) return sandbox.error();
  return std::shared_ptr<const CodeScorer>(new CodeScorer(std::move(*sandbox)));
}

RewardResultData CodeScorer::score(const RewardRequestData& request) const {
  RewardResultData out;
  out.request_id = request.request_id;
  auto task = code_task(request.task);
  if (!task) {
    out.ok = false;
    out.failure = InfraFailure::bad_request;
    out.reason = task.error().message;
    return out;
  }
  const ProgramScore s = score_program(sandbox_, request.payload, task->function, task->hidden);
  out.reason = s.reason;
  if (s.failure != InfraFailure::none) {
    out.ok = false;
    out.failure = s.failure;
    return out;
  }
  out.score = static_cast<float>(s.reward);
  if (s.first_failed) {
    out.hint = example_line(task->function, task->hidden[*s.first_failed]);
    if (out.hint.size() > kMaxHintBytes) out.hint.clear();  // a test too large to show
  }
  return out;
}

}  // namespace rlx
