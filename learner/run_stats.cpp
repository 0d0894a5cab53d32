#include "learner/run_stats.hpp"

#include <algorithm>
#include <limits>

namespace rlx {

void RunStats::add_return(float r) {
  ++episodes_;
  returns_.push_back(r);
  sum_ += r;
  if (returns_.size() > window_) {
    sum_ -= returns_.front();
    returns_.pop_front();
  }
}

void RunStats::add(const Segment& s) {
  env_steps_ += s.env_steps();
  episodes_lost_ += s.lost_episodes;
  failures_.reward_retries += s.reward_retries;
  work_ += s.work;
  failures_.rows_masked += s.masked_rows.size();
  for (std::size_t code = 0; code < s.infra_failures.size() && code < kInfraFailureCodes; ++code)
    failures_.by_code[code] += s.infra_failures[code];
  if (!s.tokens) {
    for (float r : s.episode_returns) add_return(r);  // a masked episode's return is not in the list
    return;
  }
  std::uint64_t observed = 0;
  for (auto o : s.tokens->observed) observed += o != 0;
  policy_tokens_ += s.env_steps() - std::min(observed, s.env_steps());
  // A token segment's rows are its episodes; a masked row has no outcome.
  const std::size_t first = s.tokens->prompt_width;
  for (std::size_t b = 0; b < s.episode_returns.size(); ++b)
    if (!s.step_masked(first, b)) add_return(s.episode_returns[b]);
}

RunStats::State RunStats::state() const {
  return State{env_steps_, episodes_, episodes_lost_, std::vector<float>(returns_.begin(), returns_.end()), failures_, work_, policy_tokens_};
}

void RunStats::restore(const State& s) {
  env_steps_ = s.env_steps;
  episodes_ = s.episodes;
  episodes_lost_ = s.episodes_lost;
  failures_ = s.failures;
  work_ = s.work;
  policy_tokens_ = s.policy_tokens;
  failures_.by_code.resize(kInfraFailureCodes);
  returns_.assign(s.returns.begin(), s.returns.end());
  sum_ = 0;
  for (float r : returns_) sum_ += r;
}

double RunStats::mean_return() const {
  if (returns_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sum_ / static_cast<double>(returns_.size());
}

}  // namespace rlx
