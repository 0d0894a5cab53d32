#include "explorers/explorer_loop.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace rlx {

ExplorerLoop::ExplorerLoop(const ExplorerLoopOptions& options, SegmentSource& engine)
    : options_(options), engine_(engine), credits_(options.credits) {}

ExplorerLoop::Next ExplorerLoop::next() {
  if (step_in_flight_) return Next::wait;
  // Draining: the segment in hand is finished and sent (its credit
  // awaited), held segments wait for their rewards (each request ends:
  // answered, re-asked or given up), then it leaves.
  const bool in_hand = started_ && has_weights() && engine_.steps_in_segment() > 0;
  if (draining_ && !in_hand) return !pending_ && deferred_.held() == 0 ? Next::leave : Next::wait;
  // Every step is labelled with the version that chose it, so the first
  // step waits for the learner's weights.
  if (!started_ || !has_weights() || paused_) return Next::wait;
  if (pending_) return Next::wait;  // no credit: wait for an ack
  if (engine_.steps_in_segment() == 0) {
    const auto v = engine_.version();
    if (follower_.newest() > v + options_.max_staleness) return Next::wait;  // fetch first (pacing)
    if (options_.sync && v < sync_wait_for_) return Next::wait;             // sync: wait for the next version
    if (deferred_.held() >= options_.max_held) return Next::wait;           // rewards first
  }
  step_in_flight_ = true;
  return Next::step;
}

bool ExplorerLoop::segment_done(Segment seg) {
  if (check_segment_above_ && seg.newest_version() > *check_segment_above_) {
    // Completed by the step that was in flight at a rebind: the dead head's
    // weights. What is still in hand is checked next (check_segment).
    deferred_.forget(seg.sequence);
    note(spdlog::level::info, fmt::format("dropped a segment of {} steps made with the dead head's newer weights",
                                            seg.num_steps));
    return false;
  }
  if (options_.sync) sync_wait_for_ = seg.policy_versions.back() + 1;
  deferred_.finished(std::move(seg));
  release();
  return true;
}

std::optional<RewardAsk> ExplorerLoop::deferred(std::uint64_t sequence, std::uint32_t t, std::uint32_t env,
                                                std::uint32_t episode) {
  const auto id = deferred_.note(sequence, t, env, episode);
  if (options_.reward_workers == 0) {
    deferred_.failed(id, InfraFailure::no_reward_pool);  // released with the segment, after the step
    if (!std::exchange(warned_no_pool_, true))
      note(spdlog::level::warn, "the env defers rewards but this node has no reward worker: its episodes are masked out");
    return std::nullopt;
  }
  return RewardAsk{id, next_worker_++, 0};
}

ExplorerLoop::RewardNext ExplorerLoop::answered(const RewardAsk& ask, const RewardResultData* r) {
  if (!r) return give_up_or_retry(ask, InfraFailure::malformed_reply, "a reply that did not decode");
  if (r->request_id != ask.id)
    return give_up_or_retry(ask, InfraFailure::malformed_reply, fmt::format("the answer to request {}", r->request_id));
  deferred_.spent(ask.id, r->seconds);
  if (!r->ok)
    return give_up_or_retry(ask, r->failure == InfraFailure::none ? InfraFailure::bad_request : r->failure, r->reason);
  deferred_.scored(ask.id, r->score, r->hint);
  release();
  return {};
}

ExplorerLoop::RewardNext ExplorerLoop::reward_failed(const RewardAsk& ask, const std::string& detail, InfraFailure why) {
  return give_up_or_retry(ask, why, detail);
}

ExplorerLoop::RewardNext ExplorerLoop::give_up_or_retry(const RewardAsk& ask, InfraFailure why, const std::string& detail) {
  RewardNext next{why, std::nullopt};
  if (retryable(why) && ask.attempt < options_.reward_retries) {
    deferred_.retried(ask.id, why);
    next.again = RewardAsk{ask.id, ask.worker + 1, ask.attempt + 1};
  } else {
    deferred_.failed(ask.id, why);
    release();
  }
  if (const auto held = reward_notes_.allow())
    note(spdlog::level::warn,
         fmt::format("reward request {} failed ({}{}{}); {}{}", ask.id, to_string(why), detail.empty() ? "" : ": ", detail,
                     next.again ? "asking another worker" : "its episode is masked out",
                     *held ? fmt::format(" ({} more failures since the last line)", *held) : ""));
  return next;
}

WeightFetch ExplorerLoop::fetch(std::uint64_t version, bool latest) {
  return WeightFetch{version, latest, follower_.fetch_started()};
}

std::optional<WeightFetch> ExplorerLoop::announced(std::uint64_t version) {
  follower_.announced(version);
  if (follower_.behind() && !follower_.fetch_in_flight()) return fetch(follower_.newest(), false);
  return std::nullopt;
}

ExplorerLoop::Fetched ExplorerLoop::fetched(const WeightFetch& asked, const WeightSetData* w) {
  Fetched out;
  if (!follower_.fetched(asked.epoch)) {
    // Asked before a rebind: possibly the dead head's weights. Ask again.
    if (!has_weights() || follower_.newest() > engine_.version()) out.next = fetch(0, true);
    return out;
  }
  if (w && (!has_weights() || w->version > engine_.version())) {
    if (auto ok = engine_.load_weights(*w); !ok) {
      out.rejected = ok.error();
      note(spdlog::level::warn, fmt::format("weights v{} do not fit: {}", w->version, ok.error().message));
    } else {
      follower_.hold(w->version);
      out.loaded = true;
    }
  }
  // Newer than what runs, and than weights just refused (asking for those
  // again would only be refused again).
  const auto have = out.rejected ? std::max(engine_.version(), w->version) : engine_.version();
  if (follower_.newest() > have) out.next = fetch(follower_.newest(), false);
  return out;
}

ExplorerLoop::FetchFailed ExplorerLoop::fetch_failed(const WeightFetch& asked, Errc code, const std::string& message) {
  const bool current = follower_.fetched(asked.epoch);
  if (!current && !asked.latest) return {FetchFailure::before_rebind, fetch(0, true)};
  const std::string said = std::string(to_string(code)) + (message.empty() ? "" : ": " + message);
  // After a rebind the node's store is empty until the new head's weights arrive (an announcement).
  if (!has_weights() && follower_.epoch() > 0) {
    note(spdlog::level::debug, "fetching the newest weights failed: " + said + "; the next announcement fetches");
    return {FetchFailure::empty_after_rebind, std::nullopt};
  }
  // The store evicted that version: ask for the newest instead. If the
  // store itself failed, the next announcement retries.
  if (!asked.latest) {
    note(spdlog::level::debug, fmt::format("fetching weights v{} failed: {}; asking for the newest", asked.version, said));
    return {code == Errc::not_found ? FetchFailure::evicted : FetchFailure::exact_failed, fetch(0, true)};
  }
  note(spdlog::level::warn, "fetching the newest weights failed: " + said);
  return {FetchFailure::newest_failed, std::nullopt};
}

void ExplorerLoop::ack() {
  ++credits_;
  if (pending_) offer(*std::exchange(pending_, std::nullopt));
  release();
}

void ExplorerLoop::offer(Segment segment) {
  if (credits_ > 0 && !paused_) {
    --credits_;
    segment.sent_index = ++sent_;  // numbered as it leaves: the learner's check for vanished ones
    segment.sent_base = sent_base_;
    outbox_.push_back(Outgoing{Outgoing::Kind::segment, 0, std::move(segment)});
  } else {
    pending_ = std::move(segment);
  }
}

void ExplorerLoop::release() {
  while (!pending_) {
    auto seg = deferred_.ready();
    if (!seg) return;
    outbox_.push_back(Outgoing{Outgoing::Kind::produced, ++produced_, {}});
    offer(std::move(*seg));
  }
}

ExplorerLoop::Rebound ExplorerLoop::rebind(std::uint64_t valid) {
  Rebound r;
  paused_ = false;
  credits_ = options_.credits;  // the dead learner's acks will not come
  sent_base_ = sent_ + 1;        // what the new head hears of this explorer starts here
  // A segment counts as made when it is released to be sent: the pending
  // one is, and dropping it makes it lost; held ones (waiting for rewards)
  // and the steps in hand are not, and go as dropped steps.
  r.pending_dropped = pending_ && pending_->newest_version() > valid;
  if (r.pending_dropped) pending_.reset();
  r.held_dropped = deferred_.drop_newer_than(valid);
  // Weights newer than `valid` are the dead head's: wait for the new
  // head's. The node's store forgot the dead head's sets before the rebind
  // was sent, so whatever it holds now is the new head's.
  follower_.restart(valid);
  if (!has_weights() && !follower_.fetch_in_flight()) r.fetch = fetch(0, true);
  check_segment_above_ = valid;
  const auto dropped = check_segment();
  r.dropped_in_hand = dropped.has_value();
  r.dropped_steps = dropped.value_or(0);
  r.produced = produced_;
  r.kept = pending_ ? 1 : 0;
  if (pending_) offer(*std::exchange(pending_, std::nullopt));
  note(spdlog::level::info,
       fmt::format("rejoined the restarted head ({} segments made so far; dropped as newer than v{}: {} waiting for a "
                   "credit, {} waiting for rewards, {} in hand)",
                   r.produced, valid, r.pending_dropped ? 1 : 0, r.held_dropped,
                   r.dropped_in_hand ? fmt::format("{} steps", r.dropped_steps) : "nothing"));
  return r;
}

std::optional<std::uint64_t> ExplorerLoop::check_segment() {
  if (!check_segment_above_ || step_in_flight_) return std::nullopt;
  const std::uint64_t valid = *std::exchange(check_segment_above_, std::nullopt);
  // Everything in hand counts, not only the segment's steps: agent
  // episodes under way when a segment was just taken hold tokens too.
  if (engine_.newest_in_hand() <= valid) return std::nullopt;
  const auto steps = engine_.steps_in_segment();
  deferred_.forget(engine_.drop_segment());
  note(spdlog::level::info, fmt::format("dropped what was in hand ({} steps of the segment; made with weights newer "
                                        "than v{}, the dead head's)",
                                        steps, valid));
  return steps;
}

}  // namespace rlx
