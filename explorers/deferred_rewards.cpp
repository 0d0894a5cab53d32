#include "explorers/deferred_rewards.hpp"

namespace rlx {

std::uint64_t DeferredRewards::note(std::uint64_t sequence, std::uint32_t t, std::uint32_t env, std::uint32_t episode) {
  const std::uint64_t id = next_id_++;
  slots_[id] = Slot{sequence, t, env, episode, std::nullopt};
  return id;
}

void DeferredRewards::scored(std::uint64_t id, float score) {
  auto it = slots_.find(id);
  if (it != slots_.end()) it->second.score = score;
}

void DeferredRewards::finished(Segment segment) { held_.push_back(std::move(segment)); }

void DeferredRewards::apply(Segment& s, const Slot& slot) const {
  const std::size_t at = static_cast<std::size_t>(slot.t) * s.num_envs + slot.env;
  if (at < s.rewards.size()) s.rewards[at] += *slot.score;
  if (slot.episode < s.episode_returns.size()) s.episode_returns[slot.episode] += *slot.score;
}

std::optional<Segment> DeferredRewards::ready() {
  if (held_.empty()) return std::nullopt;
  Segment& s = held_.front();
  for (const auto& [id, slot] : slots_)
    if (slot.sequence == s.sequence && !slot.score) return std::nullopt;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.sequence != s.sequence) {
      ++it;
      continue;
    }
    apply(s, it->second);
    it = slots_.erase(it);
  }
  Segment out = std::move(s);
  held_.pop_front();
  return out;
}

}  // namespace rlx
