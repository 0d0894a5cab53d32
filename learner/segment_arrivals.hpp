// What the learner can tell of each explorer's segments from the
// explorer's own numbers. Every segment carries its explorer's count of
// segments sent, itself included (Segment::sent_index, from 1), and the
// index its sending to this learner began at (sent_base: 1, or the first
// one sent to a restarted head). An index skipped is a segment that
// vanished between the two: the explorer counted it as sent and the
// learner never saw it. The coordinator's ledger sets the result beside
// what the explorers say they made (control/segment_ledger.hpp), so the
// accounting identity is a check that can fail, not a residual.
// CAF-free; single-threaded (owned by the learner actor).
#pragma once

#include <cstdint>
#include <map>

namespace rlx {

class SegmentArrivals {
 public:
  // Indices [first, last] of one explorer never arrived.
  struct Gap {
    std::uint64_t first = 0, last = 0;
    std::uint64_t count() const { return last >= first && last > 0 ? last - first + 1 : 0; }
  };
  // A segment of `explorer` arrived with its numbers; what it shows
  // vanished before it (count() 0: nothing). Index 0 (a segment of an
  // older build) is not numbered and shows nothing. An index at or below
  // the last one seen, or a new base, begins a new life of that id (an
  // explorer started again under it): its numbers start afresh.
  Gap arrived(std::uint32_t explorer, std::uint64_t sent_index, std::uint64_t sent_base);
  // A segment of `explorer` that did not decode (its index unknown): it
  // fills the next gap instead of showing as vanished.
  void unreadable(std::uint32_t explorer) { ++lives_[explorer].unreadable; }

  struct Explorer {
    std::uint64_t accounted = 0;  // the highest index accounted for (arrived, unreadable or vanished)
    std::uint64_t vanished = 0;   // indices skipped, in all its lives
  };
  Explorer of(std::uint32_t explorer) const;
  std::map<std::uint32_t, Explorer> all() const;
  std::uint64_t vanished() const { return vanished_; }

 private:
  struct Life {
    std::uint64_t sent_base = 0;       // the base its segments carry (what a new life is told by)
    std::uint64_t base = 0, last = 0;  // base: sent_base kept within [1, index]; last: the highest index seen (0: none yet)
    std::uint64_t unreadable = 0;      // undecodable arrivals not yet matched with a gap
    std::uint64_t vanished = 0;
  };
  std::map<std::uint32_t, Life> lives_;
  std::uint64_t vanished_ = 0;
};

}  // namespace rlx
