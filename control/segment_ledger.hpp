// The coordinator's segment ledger: every segment an explorer reports as
// made ends trained, dropped stale, rejected, lost (with a dead explorer,
// or with a previous head that died holding it), vanished (sent by a live
// explorer and never received) or is still in flight while the run goes
// on. It keeps what explorers say they made and sent, what a resumed
// run's log says they delivered before, who died, and what was lost with
// a previous head; account() sets that against what the learner received
// and what the explorers' own segment numbers show it
// (learner/segment_arrivals.hpp). Vanished is not a remainder: the
// learner sees an index skipped, or an explorer that left says it sent
// more than the learner accounted for at the end; so the identity
// produced = received + lost + vanished + in_flight is a check that fails
// loudly (in flight left at the end, or vanished above 0).
// CAF-free; single-threaded (owned by the coordinator).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace rlx {

class SegmentLedger {
 public:
  using Counts = std::map<std::uint32_t, std::uint64_t>;  // explorer id -> segments

  // A resumed run: what the rollout log (and checkpoint) says each explorer
  // id had delivered before, counted as made then (segments in flight in a
  // crashed run were never recorded: nothing can count them).
  void resume(Counts delivered_before) { before_ = std::move(delivered_before); }
  const Counts& delivered_before() const { return before_; }

  // An explorer says it has made `made` segments so far (reports may come
  // out of order: the largest counts).
  void produced(std::uint32_t explorer, std::uint64_t made);

  // An explorer that outlived the previous head rejoined, having made
  // `made` segments in its life and still holding `kept` to send: what
  // neither the log holds nor it still holds was lost with that head.
  // Returns that number the first time; nullopt for an explorer already
  // rejoined (its life's count was taken then).
  std::optional<std::uint64_t> rejoined(std::uint32_t explorer, std::uint64_t made, std::uint64_t kept);
  std::size_t rejoined_count() const { return lost_with_head_.size(); }

  // The explorer died, was evicted or did not drain in time: what it made
  // and the learner has not received is lost, not in flight.
  void dead(std::uint32_t explorer) { dead_.insert(explorer); }
  // The explorer left (drained, retired) saying it sent `sent` segments in its life.
  void left(std::uint32_t explorer, std::uint64_t sent) { sent_[explorer] = sent; }

  // What the learner's view of an explorer's segment numbers shows.
  struct Arrivals {
    std::uint64_t accounted = 0;  // the highest sent index accounted for
    std::uint64_t vanished = 0;   // indices skipped
  };
  using ArrivalCounts = std::map<std::uint32_t, Arrivals>;

  struct Totals {
    std::uint64_t produced = 0;   // segments explorers made
    std::uint64_t lost = 0;       // made and never received: with a dead explorer or a dead head
    std::uint64_t vanished = 0;   // sent and never received, though sender and learner lived
    std::uint64_t in_flight = 0;  // made by live explorers, not received yet
  };
  // produced = received + lost + vanished + in_flight (received: the
  // learner's count per explorer, any verdict). `final`: the learner's
  // counts were taken after every explorer that left had left, so what
  // one sent beyond what the learner accounted for vanished at the tail.
  Totals account(const Counts& received, const ArrivalCounts& arrivals = {}, bool final = false) const;

 private:
  Counts before_;
  Counts made_;                   // this head's reports (a rejoined explorer's: its life's)
  Counts lost_with_head_;
  Counts sent_;                   // what explorers that left said they sent
  Counts sent_before_;            // a rejoined explorer: what it sent before the rebind, at most
  std::set<std::uint32_t> dead_;
};

}  // namespace rlx
