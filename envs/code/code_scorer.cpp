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
  if (!task) return not_scored(request.request_id, InfraFailure::bad_request, task.error().message);
  const ProgramScore s = score_program(sandbox_, request.payload, task->function, task->hidden);
  if (s.failure != InfraFailure::none) return not_scored(request.request_id, s.failure, s.reason);
  out.reason = s.reason;
  out.score = static_cast<float>(s.reward);
  if (s.first_failed) {
    out.hint = example_line(task->function, task->hidden[*s.first_failed]);
    if (out.hint.size() > kMaxHintBytes) out.hint.clear();  // a test too large to show
  }
  return out;
}

}  // namespace rlx
