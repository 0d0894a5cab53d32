#include "learner/admission.hpp"

#include <algorithm>

namespace rlx {

namespace {

// A token segment is admitted by its newest token: the learner then
// drops its tokens past the bound one by one (learner/token_losses.hpp).
std::uint64_t lag_of(const Segment& segment, std::uint64_t learner_version) {
  const std::uint64_t oldest = segment.tokens ? segment.newest_version() : segment.oldest_version();
  return learner_version > oldest ? learner_version - oldest : 0;
}

}  // namespace

AdmissionDecision Admission::admit(const Segment& segment, std::uint64_t learner_version) {
  AdmissionDecision d;
  d.lag = lag_of(segment, learner_version);
  d.verdict = d.lag > max_staleness_ ? Verdict::dropped_stale : Verdict::trained;
  count(d.verdict, d.lag, segment.env_steps());
  return d;
}

void Admission::count(Verdict verdict, std::uint64_t lag, std::uint64_t env_steps) {
  if (verdict == Verdict::rejected) {
    ++rejected_;
    return;
  }
  if (verdict == Verdict::dropped_stale) {
    ++dropped_;
    return;
  }
  ++accepted_;
  histogram_[std::min<std::uint64_t>(lag, max_staleness_)] += env_steps;
  window_sum_ += static_cast<double>(lag);
  ++window_n_;
  window_max_ = std::max(window_max_, lag);
}

void Admission::take_back(const Segment& segment, std::uint64_t learner_version) {
  if (accepted_ > 0) --accepted_;
  auto& h = histogram_[std::min<std::uint64_t>(lag_of(segment, learner_version), max_staleness_)];
  h -= std::min<std::uint64_t>(h, segment.env_steps());
}

bool Admission::restore(const State& s) {
  if (s.histogram.size() != histogram_.size()) return false;
  accepted_ = s.accepted;
  dropped_ = s.dropped;
  rejected_ = s.rejected;
  histogram_ = s.histogram;
  return true;
}

Admission::Window Admission::take_window() {
  Window w;
  if (window_n_) w.mean = window_sum_ / static_cast<double>(window_n_);
  w.max = window_max_;
  window_sum_ = 0;
  window_n_ = 0;
  window_max_ = 0;
  return w;
}

}  // namespace rlx
