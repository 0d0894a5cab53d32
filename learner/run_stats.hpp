// Counters of a run as the learner sees it: env steps and episodes in the
// segments it received (any verdict: the episodes happened), the mean
// return of the last 100 episodes (masked ones left out: they have no
// outcome), and the infrastructure failures the segments carry.
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
  std::uint64_t reward_retries() const { return failures_.reward_retries; }
  std::uint64_t rows_masked() const { return failures_.rows_masked; }
  // By InfraFailure code (kInfraFailureCodes entries).
  const std::vector<std::uint64_t>& infra_failures() const { return failures_.by_code; }
  // Where the explorers' and scorers' time went, summed over the segments.
  const SegmentWork& work() const { return work_; }
  // Token segments: the tokens the policy sampled (env steps less the
  // tokens the environment wrote into the rows).
  std::uint64_t policy_tokens() const { return policy_tokens_; }
  // NaN before the first episode ends.
  double mean_return() const;
  // True once `window` episodes have ended (the mean is over a full window).
  bool window_full() const { return returns_.size() >= window_; }

  // Everything, for checkpoints.
  struct Failures {
    std::uint64_t reward_retries = 0, rows_masked = 0;
    std::vector<std::uint64_t> by_code = std::vector<std::uint64_t>(kInfraFailureCodes);
  };
  struct State {
    std::uint64_t env_steps = 0, episodes = 0, episodes_lost = 0;
    std::vector<float> returns;  // the window, oldest first
    Failures failures;
    SegmentWork work;
    std::uint64_t policy_tokens = 0;
  };
  State state() const;
  void restore(const State& s);

 private:
  std::size_t window_;
  void add_return(float r);
  std::uint64_t env_steps_ = 0, episodes_ = 0, episodes_lost_ = 0;
  Failures failures_;
  SegmentWork work_;
  std::uint64_t policy_tokens_ = 0;
  std::deque<float> returns_;
  double sum_ = 0;
};

}  // namespace rlx
