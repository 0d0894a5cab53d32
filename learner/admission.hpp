// The staleness contract at the learner's door (docs/architecture.md):
// lag = learner_version - oldest step version; accept when
// lag <= max_staleness, else drop and count. Nothing is dropped silently.
// A token segment's lag is its newest token's: its older tokens are
// admitted per token by the trainer.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/types.hpp"

namespace rlx {

struct AdmissionDecision {
  Verdict verdict = Verdict::trained;
  std::uint64_t lag = 0;
};

class Admission {
 public:
  explicit Admission(std::uint64_t max_staleness) : max_staleness_(max_staleness), histogram_(max_staleness + 1, 0) {}

  // Decides and counts. A segment from the future (a version the learner
  // never had) is treated as lag 0: it can only come from a restarted
  // learner whose counter is behind; its data is still fresh.
  AdmissionDecision admit(const Segment& segment, std::uint64_t learner_version);
  // Counts a segment that failed decoding.
  void count_rejected() { ++rejected_; }
  // A batch's update failed: `segment`, counted trained when admitted at
  // `learner_version`, was not trained after all (its steps leave the lag
  // histogram too).
  void take_back(const Segment& segment, std::uint64_t learner_version);
  // Counts a verdict decided elsewhere (a replayed log): the same
  // bookkeeping as admit() would have done.
  void count(Verdict verdict, std::uint64_t lag, std::uint64_t env_steps);

  std::uint64_t max_staleness() const { return max_staleness_; }
  std::uint64_t accepted() const { return accepted_; }
  std::uint64_t dropped_stale() const { return dropped_; }
  std::uint64_t rejected() const { return rejected_; }
  // Accepted steps by lag 0..max_staleness.
  const std::vector<std::uint64_t>& lag_histogram() const { return histogram_; }

  // Lag of accepted segments since the last call; resets the window.
  struct Window { double mean = 0; std::uint64_t max = 0; };
  Window take_window();

  // The counters, for checkpoints (the lag window is not kept).
  struct State {
    std::uint64_t accepted = 0, dropped = 0, rejected = 0;
    std::vector<std::uint64_t> histogram;
  };
  State state() const { return State{accepted_, dropped_, rejected_, histogram_}; }
  // False when the histogram does not fit this max_staleness.
  bool restore(const State& s);

 private:
  std::uint64_t max_staleness_;
  std::uint64_t accepted_ = 0, dropped_ = 0, rejected_ = 0;
  std::vector<std::uint64_t> histogram_;
  double window_sum_ = 0;
  std::uint64_t window_n_ = 0, window_max_ = 0;
};

}  // namespace rlx
