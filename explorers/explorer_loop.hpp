// The explorer's decisions, without the actor: when to step, when to fetch
// weights and which, when a segment may go to the learner (credits), when
// it must wait (staleness pacing, sync mode, segments held for deferred
// rewards), when to leave (drain), what a restarted head costs (the
// rebind) and where a reward request goes next. The explorer actor
// (actors/explorer_actor.cpp) feeds it events (a step done, weights
// announced or fetched, an ack, a reward, a drain, a pause, a rebind) and
// carries out what it says: it sends what outbox() holds, makes the fetch
// or reward request returned, and steps when next() says step. CAF-free;
// single-threaded (owned by one actor). Tested decision by decision in
// tests/explorers/explorer_loop_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/common.h>

#include "core/log_throttle.hpp"
#include "explorers/deferred_rewards.hpp"
#include "explorers/segment_source.hpp"
#include "explorers/weight_follower.hpp"

namespace rlx {

struct ExplorerLoopOptions {
  std::uint64_t max_staleness = 4;   // no new segment while the newest version announced is further ahead
  bool sync = false;                 // wait for a new version after every segment
  std::uint32_t credits = 2;         // segments in flight to the learner (unacknowledged)
  std::size_t max_held = 4;          // segments held for rewards before the explorer pauses
  std::size_t reward_workers = 0;    // the node's reward pool (0: deferred episodes are masked)
  int reward_retries = 2;            // a reward asked again this often after a failure of the machinery
};

// A weight fetch to make: `version` exactly, or the newest the store holds.
struct WeightFetch {
  std::uint64_t version = 0;
  bool latest = false;
  std::uint64_t epoch = 0;  // hand back with the answer
};

// A request to score deferred episode `id` on reward worker `worker` (an
// index into the pool, taken modulo its size), the `attempt`-th (from 0:
// attempts after the first are retries).
struct RewardAsk {
  std::uint64_t id = 0;
  std::size_t worker = 0;
  int attempt = 0;
};

// Something the loop did that an operator should read (a dropped segment,
// weights that did not fit, a failed fetch or reward request, a rebind's
// cost): the actor logs it, prefixed with the explorer's name.
struct LoopNote {
  spdlog::level::level_enum level = spdlog::level::info;
  std::string text;
};

// What to send, in order: a segment made (counted to the coordinator
// before it leaves, so a node that dies with it in hand is known to have
// lost it), or a segment to the learner (its credit taken).
struct Outgoing {
  enum class Kind { produced, segment } kind = Kind::segment;
  std::uint64_t produced = 0;  // kind produced: the explorer's count so far
  Segment segment;             // kind segment
};

class ExplorerLoop {
 public:
  // `engine`: the explorer's compute (not owned; outlives the loop).
  ExplorerLoop(const ExplorerLoopOptions& options, SegmentSource& engine);

  enum class Next { wait, step, leave };
  // What to do now: step (the step is then in flight until step_done()),
  // wait for an event, or leave (drained: nothing in hand, pending or held).
  Next next();

  // The environments gave their first observations (a token policy has
  // none to wait for: call it at once).
  void started() { started_ = true; }
  bool is_started() const { return started_; }
  // The environments' reset is out: its result comes back as a step.
  void reset_sent() { step_in_flight_ = true; }
  // The step in flight ended (its result is in the engine).
  void step_done() { step_in_flight_ = false; }
  bool step_in_flight() const { return step_in_flight_; }

  // A segment is complete: held for its deferred rewards, then released.
  // A segment completed by the step in flight at a rebind, with steps of
  // versions the restarted head never made, is dropped: returns false.
  bool segment_done(Segment segment);

  // Deferred rewards. An episode ended with its reward deferred: where to
  // ask (nullopt when the node has no reward worker: the episode is masked
  // at once, InfraFailure::no_reward_pool, and a note says so once).
  std::optional<RewardAsk> deferred(std::uint64_t sequence, std::uint32_t t, std::uint32_t env, std::uint32_t episode);
  // What came of a reward request, and what to do next. A failure of the
  // machinery (the worker's own, a reply that did not decode or answered
  // another request, a timeout or a dead worker) is asked of the next
  // worker while retries are left and asking again can help; then the
  // episode is masked out of the update. It is never a score.
  struct RewardNext {
    InfraFailure failure = InfraFailure::none;  // none: scored
    std::optional<RewardAsk> again;             // ask this next
  };
  // A worker answered `ask` with `result` (null: the reply did not decode).
  // Failures are noted (a line a second at most, with the count held back).
  RewardNext answered(const RewardAsk& ask, const RewardResultData* result);
  // The request failed (timeout, a dead or refusing worker: `detail`).
  RewardNext reward_failed(const RewardAsk& ask, const std::string& detail = "",
                           InfraFailure why = InfraFailure::reward_timeout);

  // Weights. The store announced `version`: the fetch to make, if any.
  std::optional<WeightFetch> announced(std::uint64_t version);
  // A fetch answered with `weights` (null: the answer did not decode). The
  // loop loads them when they are newer (or the first); returns what came
  // of it and the fetch to make next, if any.
  struct Fetched {
    bool loaded = false;                  // the engine now runs these weights
    std::optional<Error> rejected;        // they did not fit the engine
    std::optional<WeightFetch> next;      // a newer version to fetch
  };
  Fetched fetched(const WeightFetch& asked, const WeightSetData* weights);
  // A fetch failed with `code` (the store's not_found, a timeout, ...):
  // why it matters and what to ask instead.
  enum class FetchFailure {
    before_rebind,       // asked of the dead head's store: ask again
    empty_after_rebind,  // the node's store has nothing yet: the next announcement fetches
    evicted,             // not_found: that version is gone (the explorer fell behind): ask for the newest
    exact_failed,        // that version's fetch failed otherwise (timeout, a dead store): ask for the newest
    newest_failed,       // the store could not give its newest: the next announcement retries
  };
  struct FetchFailed {
    FetchFailure why;
    std::optional<WeightFetch> next;
  };
  FetchFailed fetch_failed(const WeightFetch& asked, Errc code, const std::string& message = "");
  bool has_weights() const { return follower_.held().has_value(); }
  std::uint64_t newest_known() const { return follower_.newest(); }

  // Credits: the learner acknowledged a segment.
  void ack();
  // Drain: finish and send the segment in hand, wait for held rewards, leave.
  void drain() { draining_ = true; }
  // The node lost its head: no step, no segment sent until rebind().
  void pause() { paused_ = true; }
  bool paused() const { return paused_; }

  // The node reached a restarted head that vouches for versions up to
  // `valid`: what was made with the dead head's newer weights goes (the
  // pending segment is counted lost, held ones and the steps in hand are
  // dropped), credits are reset (the dead learner's acks will not come)
  // and the explorer rejoins with its counts.
  struct Rebound {
    bool pending_dropped = false;
    std::size_t held_dropped = 0;
    bool dropped_in_hand = false;      // what was in hand was dropped now (else checked after the step in flight)
    std::uint64_t dropped_steps = 0;   // of it, the segment's steps
    std::uint64_t produced = 0;        // segments made in its life (for the rejoin)
    std::uint64_t kept = 0;            // of those, still to send
    std::optional<WeightFetch> fetch;  // the new head's weights
  };
  Rebound rebind(std::uint64_t valid);
  // After a step: drops what is in hand if a rebind found it newer than
  // the restarted head's versions (checked once no step is in flight).
  // Returns the segment's steps dropped; nullopt: nothing was dropped.
  std::optional<std::uint64_t> check_segment();

  // Messages to send, in order; taken by the actor after each event.
  std::vector<Outgoing> take_outbox() { return std::exchange(outbox_, {}); }
  // What to log, in order; taken with the outbox.
  std::vector<LoopNote> take_notes() { return std::exchange(notes_, {}); }

  std::uint32_t credits() const { return credits_; }
  bool has_pending() const { return pending_.has_value(); }
  std::size_t held() const { return deferred_.held(); }
  std::uint64_t produced() const { return produced_; }
  // Segments sent to learners in its life; each carries its number
  // (Segment::sent_index) and where its sending to this learner began.
  std::uint64_t sent() const { return sent_; }

 private:
  void offer(Segment segment);  // to the learner if a credit allows, else pending
  void release();               // held segments whose rewards are in, while nothing is pending
  RewardNext give_up_or_retry(const RewardAsk& ask, InfraFailure why, const std::string& detail);
  void note(spdlog::level::level_enum level, std::string text) { notes_.push_back({level, std::move(text)}); }
  WeightFetch fetch(std::uint64_t version, bool latest);

  ExplorerLoopOptions options_;
  SegmentSource& engine_;
  WeightFollower follower_;
  DeferredRewards deferred_;
  std::optional<Segment> pending_;     // a segment waiting for a credit
  std::vector<Outgoing> outbox_;
  std::vector<LoopNote> notes_;
  LogThrottle reward_notes_;
  std::uint32_t credits_ = 0;
  std::uint64_t sync_wait_for_ = 0;    // sync mode: the version needed before the next segment
  std::uint64_t produced_ = 0;
  std::uint64_t sent_ = 0;
  std::uint64_t sent_base_ = 1;
  std::size_t next_worker_ = 0;
  std::optional<std::uint64_t> check_segment_above_;
  bool started_ = false;
  bool step_in_flight_ = false;
  bool draining_ = false;
  bool paused_ = false;
  bool warned_no_pool_ = false;
};

}  // namespace rlx
