// Following the weight store, the part every follower shares (explorers,
// the evaluator, the weight relay): the newest version announced, the
// version held, whether a fetch is out, and an epoch that a restarted head
// bumps so that a fetch asked before it is not trusted. It decides nothing
// about what a follower does with weights; it only keeps the books those
// decisions read. CAF-free; single-threaded (owned by one actor).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace rlx {

class WeightFollower {
 public:
  // The store announced `version` (announcements may come out of order).
  void announced(std::uint64_t version) { newest_ = std::max(newest_, version); }
  std::uint64_t newest() const { return newest_; }

  // The version whose weights are in use (nullopt: none yet).
  const std::optional<std::uint64_t>& held() const { return held_; }
  void hold(std::uint64_t version) { held_ = version; }
  // Nothing held, or a newer version announced than the one held.
  bool behind() const { return !held_ || newest_ > *held_; }

  // A fetch leaves: returns the epoch to hand back to fetched().
  std::uint64_t fetch_started() {
    in_flight_ = true;
    return epoch_;
  }
  bool fetch_in_flight() const { return in_flight_; }
  // A fetch came back (answered or failed): whether it was asked in this
  // epoch, i.e. whether its answer can be trusted.
  bool fetched(std::uint64_t epoch) {
    in_flight_ = false;
    return epoch == epoch_;
  }

  // A restarted head vouches for versions up to `valid`: announcements
  // above it were the dead head's, and so are held weights above it; a
  // fetch out now is from the old epoch.
  void restart(std::uint64_t valid) {
    ++epoch_;
    newest_ = std::min(newest_, valid);
    if (held_ && *held_ > valid) held_.reset();
  }
  // A store to follow whose versions are not the old one's: everything
  // held or announced is forgotten.
  void restart_all() {
    ++epoch_;
    newest_ = 0;
    held_.reset();
  }
  std::uint64_t epoch() const { return epoch_; }

 private:
  std::uint64_t newest_ = 0;
  std::optional<std::uint64_t> held_;
  bool in_flight_ = false;
  std::uint64_t epoch_ = 0;
};

}  // namespace rlx
