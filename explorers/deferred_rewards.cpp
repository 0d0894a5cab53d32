#include "explorers/deferred_rewards.hpp"

#include <algorithm>
#include <functional>

namespace rlx {

RewardRequestData reward_request(std::uint64_t id, std::uint32_t explorer_id, const std::string& payload) {
  const auto nl = payload.find('\n');
  if (nl == std::string::npos) return RewardRequestData{id, explorer_id, "", payload};
  return RewardRequestData{id, explorer_id, payload.substr(0, nl), payload.substr(nl + 1)};
}

std::uint64_t DeferredRewards::note(std::uint64_t sequence, std::uint32_t t, std::uint32_t env, std::uint32_t episode) {
  const std::uint64_t id = next_id_++;
  slots_[id] = Slot{sequence, t, env, episode, std::nullopt, {}, InfraFailure::none, {}};
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

void DeferredRewards::failed(std::uint64_t id, InfraFailure why) {
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.score) return;
  it->second.failure = why;
  scored(id, 0.0f);
}

void DeferredRewards::retried(std::uint64_t id, InfraFailure why) {
  if (auto it = slots_.find(id); it != slots_.end() && !it->second.score) it->second.retried.push_back(why);
}

void DeferredRewards::spent(std::uint64_t id, double seconds) {
  if (auto it = slots_.find(id); it != slots_.end()) it->second.seconds += seconds;
}

void DeferredRewards::finished(Segment segment) { held_.push_back(std::move(segment)); }

void DeferredRewards::apply(Segment& s, Slot& slot, std::vector<std::uint32_t>& dropped) {
  for (const auto why : slot.retried) s.count_failure(why);
  s.reward_retries += static_cast<std::uint32_t>(slot.retried.size());
  s.work.score_s += slot.seconds;
  if (slot.env >= s.num_envs || slot.t >= s.num_steps) return;
  if (slot.failure != InfraFailure::none) {
    // The episode's steps in this segment: a token row whole; else back to
    // the step after the env's previous episode ended.
    std::uint32_t first = 0;
    if (!s.tokens)
      for (first = slot.t; first > 0; --first) {
        const std::size_t before = static_cast<std::size_t>(first - 1) * s.num_envs + slot.env;
        if ((before < s.terminated.size() && s.terminated[before]) || (before < s.truncated.size() && s.truncated[before]))
          break;
      }
    s.mask_episode(first, s.tokens ? s.num_steps - 1 : slot.t, slot.env, slot.failure);
    if (!s.tokens) dropped.push_back(slot.episode);
    return;
  }
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
    std::vector<std::uint32_t> dropped;
    for (const std::uint64_t id : per->second.ids) {
      apply(s, slots_.at(id), dropped);
      slots_.erase(id);
    }
    by_segment_.erase(per);
    // Masked episodes have no return to report (highest index first).
    std::sort(dropped.begin(), dropped.end(), std::greater<>());
    for (const auto e : dropped) {
      if (e >= s.episode_returns.size()) continue;
      s.episode_returns.erase(s.episode_returns.begin() + e);
      if (e < s.episode_lengths.size()) s.episode_lengths.erase(s.episode_lengths.begin() + e);
    }
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
