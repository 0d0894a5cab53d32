#include "explorers/deferred_rewards.hpp"

namespace rlx {

RewardRequestData reward_request(std::uint64_t id, std::uint32_t explorer_id, const std::string& payload) {
  const auto nl = payload.find('\n');
  if (nl == std::string::npos) return RewardRequestData{id, explorer_id, "", payload};
  return RewardRequestData{id, explorer_id, payload.substr(0, nl), payload.substr(nl + 1)};
}

std::uint64_t DeferredRewards::note(std::uint64_t sequence, std::uint32_t t, std::uint32_t env, std::uint32_t episode) {
  const std::uint64_t id = next_id_++;
  slots_[id] = Slot{sequence, t, env, episode, std::nullopt, {}};
  auto& per = by_segment_[sequence];
  per.ids.push_back(id);
  ++per.unscored;
  return id;
}

void DeferredRewards::scored(std::uint64_t id, float score, std::string hint) {
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.score) return;
  it->second.score = score;
  it->second.hint = std::move(hint);
  --by_segment_[it->second.sequence].unscored;
}

void DeferredRewards::finished(Segment segment) { held_.push_back(std::move(segment)); }

void DeferredRewards::apply(Segment& s, Slot& slot) {
  const std::size_t at = static_cast<std::size_t>(slot.t) * s.num_envs + slot.env;
  if (at < s.rewards.size()) s.rewards[at] += *slot.score;
  if (slot.episode < s.episode_returns.size()) s.episode_returns[slot.episode] += *slot.score;
  if (s.tokens && !slot.hint.empty() && slot.env < s.num_envs) {
    s.tokens->hints.resize(s.num_envs);
    s.tokens->hints[slot.env] = std::move(slot.hint);
  }
}

std::optional<Segment> DeferredRewards::ready() {
  if (held_.empty()) return std::nullopt;
  Segment& s = held_.front();
  if (auto per = by_segment_.find(s.sequence); per != by_segment_.end()) {
    if (per->second.unscored > 0) return std::nullopt;
    for (const std::uint64_t id : per->second.ids) {
      apply(s, slots_.at(id));
      slots_.erase(id);
    }
    by_segment_.erase(per);
  }
  Segment out = std::move(s);
  held_.pop_front();
  return out;
}

void DeferredRewards::forget(std::uint64_t sequence) {
  auto per = by_segment_.find(sequence);
  if (per == by_segment_.end()) return;
  for (const std::uint64_t id : per->second.ids) slots_.erase(id);
  by_segment_.erase(per);
}

std::size_t DeferredRewards::drop_newer_than(std::uint64_t version) {
  std::size_t dropped = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->newest_version() <= version) {
      ++it;
      continue;
    }
    forget(it->sequence);
    it = held_.erase(it);
    ++dropped;
  }
  return dropped;
}

}  // namespace rlx
