// Counters of a run as the learner sees it: env steps and episodes in the
// segments it received (any verdict: the episodes happened), and the mean
// return of the last 100 episodes.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "messages/types.hpp"

namespace rlx {

class RunStats {
 public:
  explicit RunStats(std::size_t window = 100) : window_(window) {}
  void add(const Segment& s);
  std::uint64_t env_steps() const { return env_steps_; }
  std::uint64_t episodes() const { return episodes_; }
  std::uint64_t episodes_lost() const { return episodes_lost_; }
  // NaN before the first episode ends.
  double mean_return() const;
  // True once `window` episodes have ended (the mean is over a full window).
  bool window_full() const { return returns_.size() >= window_; }

  // Everything, for checkpoints.
  struct State {
    std::uint64_t env_steps = 0, episodes = 0, episodes_lost = 0;
    std::vector<float> returns;  // the window, oldest first
  };
  State state() const;
  void restore(const State& s);

 private:
  std::size_t window_;
  std::uint64_t env_steps_ = 0, episodes_ = 0, episodes_lost_ = 0;
  std::deque<float> returns_;
  double sum_ = 0;
};

}  // namespace rlx
