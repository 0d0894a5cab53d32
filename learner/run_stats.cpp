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

double RunStats::mean_return() const {
  if (returns_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sum_ / static_cast<double>(returns_.size());
}

}  // namespace rlx
