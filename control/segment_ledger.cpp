#include "control/segment_ledger.hpp"

#include <algorithm>

namespace rlx {

namespace {

std::uint64_t at(const SegmentLedger::Counts& c, std::uint32_t id) {
  auto it = c.find(id);
  return it == c.end() ? 0 : it->second;
}

}  // namespace

void SegmentLedger::produced(std::uint32_t explorer, std::uint64_t made) {
  auto& n = made_[explorer];
  n = std::max(n, made);
}

std::optional<std::uint64_t> SegmentLedger::rejoined(std::uint32_t explorer, std::uint64_t made, std::uint64_t kept) {
  if (lost_with_head_.count(explorer)) return std::nullopt;
  const std::uint64_t accounted = at(before_, explorer) + kept;
  const std::uint64_t lost = made > accounted ? made - accounted : 0;
  lost_with_head_[explorer] = lost;
  sent_before_[explorer] = made - std::min(made, kept);  // at most: went to the dead head before the rebind
  produced(explorer, made);
  return lost;
}

SegmentLedger::Totals SegmentLedger::account(const Counts& received, const ArrivalCounts& arrivals, bool final) const {
  // A rejoined explorer's count is its life's, which includes what the log
  // holds; anyone else's counts only this head's run.
  Counts made_by = before_;
  for (const auto& [id, made] : made_)
    made_by[id] = lost_with_head_.count(id) ? std::max(made_by[id], made) : made_by[id] + made;
  Totals t;
  for (const auto& [id, made] : made_by) {
    t.produced += made;
    const std::uint64_t got = at(received, id);
    std::uint64_t missing = made > got ? made - got : 0;
    if (auto a = arrivals.find(id); a != arrivals.end() || final) {
      const Arrivals seen = a != arrivals.end() ? a->second : Arrivals{};
      const std::uint64_t sent = at(sent_, id);
      // A rejoined explorer's numbers began at the dead head: those are not this learner's to see.
      const std::uint64_t accounted = std::max(seen.accounted, at(sent_before_, id));
      // What an explorer declared dead (it did not drain in time) sent last
      // may still have been on its way when the learner stopped: lost with
      // it, below, not vanished; gaps the learner saw stay vanished.
      const std::uint64_t tail = final && !dead_.count(id) && sent > accounted ? sent - accounted : 0;
      const std::uint64_t vanished = std::min(missing, seen.vanished + tail);
      t.vanished += vanished;
      missing -= vanished;
    }
    if (auto l = lost_with_head_.find(id); l != lost_with_head_.end()) {
      const std::uint64_t with_head = std::min(missing, l->second);
      t.lost += with_head;
      missing -= with_head;
    }
    (dead_.count(id) ? t.lost : t.in_flight) += missing;
  }
  return t;
}

}  // namespace rlx
