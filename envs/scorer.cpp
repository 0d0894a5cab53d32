#include "envs/scorer.hpp"

#include <charconv>

#include "envs/code/code_scorer.hpp"
#include "envs/workspace/workspace_scorer.hpp"

namespace rlx {

namespace {
bool parse_int(std::string_view s, long long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}
}  // namespace

RewardResultData not_scored(std::uint64_t request_id, InfraFailure why, std::string reason) {
  RewardResultData out;
  out.request_id = request_id;
  out.ok = false;
  out.failure = why;
  out.reason = std::move(reason);
  return out;
}

RewardResultData ArithmeticScorer::score(const RewardRequestData& req) const {
  RewardResultData out;
  out.request_id = req.request_id;
  std::string_view t = req.task;
  auto op = t.find_first_of("+-*", 1);
  long long a = 0, b = 0, answer = 0;
  if (op == std::string_view::npos || !parse_int(t.substr(0, op), a) || !parse_int(t.substr(op + 1), b))
    return not_scored(req.request_id, InfraFailure::bad_request, "unreadable task");
  long long expected = 0;
  bool overflow = t[op] == '+' ? __builtin_add_overflow(a, b, &expected)
                  : t[op] == '-' ? __builtin_sub_overflow(a, b, &expected)
                                  : __builtin_mul_overflow(a, b, &expected);
  if (overflow) return not_scored(req.request_id, InfraFailure::bad_request, "task overflows");
  // The hint for a wrong answer is the task answered: "12+7=19".
  const std::string hint = std::string(t) + "=" + std::to_string(expected) + "\n";
  if (!parse_int(req.payload, answer)) {
    out.reason = "answer is not an integer";
    out.hint = hint;
    return out;
  }
  out.score = answer == expected ? 1.0f : 0.0f;
  out.reason = answer == expected ? "correct" : "wrong";
  if (answer != expected) out.hint = hint;
  return out;
}

Result<std::shared_ptr<const Scorer>> make_scorer(const std::string& kind) {
  if (kind == "arithmetic") return std::shared_ptr<const Scorer>(std::make_shared<const ArithmeticScorer>());
  if (kind == "code") {
    auto code = CodeScorer::open();
    if (!code) return make_error(code.error().code, "[reward] scorer = \"code\" needs the sandbox: " + code.error().message);
    return std::shared_ptr<const Scorer>(*code);
  }
  if (kind == "workspace") {
    auto workspace = WorkspaceScorer::open();
    if (!workspace)
      return make_error(workspace.error().code, "[reward] scorer = \"workspace\" needs the sandbox: " + workspace.error().message);
    return std::shared_ptr<const Scorer>(*workspace);
  }
  return make_error(Errc::config_unknown_name, "no scorer '" + kind + "' (arithmetic, code, workspace)");
}

}  // namespace rlx
