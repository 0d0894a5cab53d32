#include "learner/run_stats.hpp"

#include <limits>

namespace rlx {

void RunStats::add(const Segment& s) {
  env_steps_ += s.env_steps();
  episodes_lost_ += s.lost_episodes;
  for (float r : s.episode_returns) {
    ++episodes_;
    returns_.push_back(r);
    sum_ += r;
    if (returns_.size() > window_) {
      sum_ -= returns_.front();
      returns_.pop_front();
    }
  }
}

RunStats::State RunStats::state() const {
  return State{env_steps_, episodes_, episodes_lost_, std::vector<float>(returns_.begin(), returns_.end())};
}

void RunStats::restore(const State& s) {
  env_steps_ = s.env_steps;
  episodes_ = s.episodes;
  episodes_lost_ = s.episodes_lost;
  returns_.assign(s.returns.begin(), s.returns.end());
  sum_ = 0;
  for (float r : returns_) sum_ += r;
}

double RunStats::mean_return() const {
  if (returns_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sum_ / static_cast<double>(returns_.size());
}

}  // namespace rlx
