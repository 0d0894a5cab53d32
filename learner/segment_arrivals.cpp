#include "learner/segment_arrivals.hpp"

#include <algorithm>

namespace rlx {

SegmentArrivals::Gap SegmentArrivals::arrived(std::uint32_t explorer, std::uint64_t index, std::uint64_t base) {
  if (index == 0) return {};
  Life& l = lives_[explorer];
  if (l.last == 0 || base != l.sent_base || index <= l.last) {
    // Its first numbered segment here, or a new life under this id. An
    // unreadable one before the first numbered one may be that life's first.
    if (l.last != 0) l.unreadable = 0;
    l.sent_base = base;  // compared as it came: a clamped one would begin a new life at every arrival
    l.base = std::clamp<std::uint64_t>(base, 1, index);  // a base above its own index cannot be: the index counts
    l.last = l.base - 1;
  }
  std::uint64_t skipped = index - l.last - 1;
  const std::uint64_t filled = std::min(skipped, l.unreadable);
  l.unreadable -= filled;
  skipped -= filled;
  Gap g;
  if (skipped > 0) g = Gap{index - skipped, index - 1};
  l.vanished += skipped;
  vanished_ += skipped;
  l.last = index;
  return g;
}

SegmentArrivals::Explorer SegmentArrivals::of(std::uint32_t explorer) const {
  auto it = lives_.find(explorer);
  if (it == lives_.end()) return {};
  return Explorer{it->second.last + it->second.unreadable, it->second.vanished};
}

std::map<std::uint32_t, SegmentArrivals::Explorer> SegmentArrivals::all() const {
  std::map<std::uint32_t, Explorer> out;
  for (const auto& [id, life] : lives_) out[id] = of(id);
  return out;
}

}  // namespace rlx
