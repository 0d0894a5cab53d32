#include "actors/explorer_actor.hpp"

#include <optional>

#include "actors/guard.hpp"
#include "explorers/deferred_rewards.hpp"

namespace rlx {

struct ExplorerState {
  ExplorerActorOptions options;
  std::unique_ptr<Rollout> rollout;       // vector observations and environments, or
  std::unique_ptr<TokenRollout> tokens;   // the token policy's own decoding
  SegmentSource* engine = nullptr;        // whichever of the two
  std::unique_ptr<BatchEnv> local;        // set when the envs live in this actor
  EnvStepResultData result;               // the last local step
  std::string name;
  std::vector<float> obs;                 // current observations [B, D]
  std::optional<WireMsg> pending;         // a segment waiting for a credit
  std::uint64_t pending_newest = 0;       // the newest version among its steps
  std::uint32_t credits = 0;
  std::uint64_t newest_known = 0;         // newest version announced by the store
  std::uint64_t sync_wait_for = 0;        // sync mode: version needed before the next segment
  std::uint64_t step_index = 0;
  bool started = false;                   // env reset done
  bool has_weights = false;               // the learner's weights are loaded (no step before that)
  bool step_in_flight = false;
  bool fetch_in_flight = false;
  bool draining = false;
  bool paused = false;                    // the node lost the head: no step, no segment sent
  std::uint64_t rebinds = 0;              // restarted heads followed (a fetch from before one is not trusted)
  // A restarted head vouches for versions up to this one: the segment in
  // hand is checked once no step is in flight.
  std::optional<std::uint64_t> check_segment_above;
  std::uint64_t produced = 0;             // segments made (reported to the coordinator before each is sent)
  DeferredRewards deferred;               // segments waiting for deferred rewards
  std::size_t next_worker = 0;            // the reward worker a new request goes to (in turn)
  bool warned_no_pool = false;
  std::chrono::steady_clock::time_point fetch_started;
  ErrorCounts errors;
};

namespace {

using Self = explorer_actor::stateful_pointer<ExplorerState>;

void advance(Self self);
void fetch(Self self, std::uint64_t version, bool latest = false);
void segment_done(Self self, Segment seg);

void leave(Self self, const std::string& reason) {
  auto& st = self->state;
  LeaveData l{Role::explorer, st.options.rollout.explorer_id, reason};
  self->send(st.options.coordinator, leave_atom::value, WireMsg{encode(l, st.name)});
  self->quit();
}

void fail(Self self, const std::string& what) {
  self->state.options.log->error("{}: {}; leaving", self->state.name, what);
  self->quit(caf::sec::runtime_error);
}

void send_segment(Self self, WireMsg msg, std::uint64_t newest) {
  auto& st = self->state;
  if (st.credits > 0 && !st.paused) {
    --st.credits;
    self->send(st.options.learner, segment_atom::value, std::move(msg));
  } else {
    st.pending = std::move(msg);
    st.pending_newest = newest;
  }
}

JoinData join_data(const ExplorerState& st) {
  JoinData j{Role::explorer, st.options.node, st.options.rollout.explorer_id, {}};
  j.first_env_id = st.options.first_env_id;
  j.num_envs = static_cast<std::uint32_t>(st.options.rollout.num_envs);
  return j;
}

// The segment in hand holds steps of versions the restarted head never
// made: they go (the environments go on).
void check_segment(Self self) {
  auto& st = self->state;
  if (!st.check_segment_above || st.step_in_flight) return;
  const std::uint64_t valid = *std::exchange(st.check_segment_above, std::nullopt);
  if (st.engine->steps_in_segment() == 0 || st.engine->newest_in_segment() <= valid) return;
  const auto steps = st.engine->steps_in_segment();
  st.deferred.forget(st.engine->drop_segment());
  st.options.log->info("{}: dropped the {} steps in hand (made with weights newer than v{})", st.name, steps, valid);
}

// The node reached a restarted head: segments and steps of versions above
// `valid` (the dead head's weights, which the new learner never had) are
// dropped; the rest is sent to the new learner.
void rebind(Self self, learner_actor learner, coordinator_actor coordinator, std::uint64_t valid) {
  auto& st = self->state;
  st.options.learner = learner;
  st.options.coordinator = coordinator;
  st.paused = false;
  st.credits = st.options.credits;  // the dead learner's acks will not come
  // A segment counts as made when it is released to be sent: the pending
  // one is, and dropping it makes it lost; held ones (waiting for rewards)
  // and the steps in hand are not, and go as dropped steps (logged).
  const bool pending_dropped = st.pending && st.pending_newest > valid;
  if (pending_dropped) st.pending.reset();
  const std::size_t held = st.deferred.drop_newer_than(valid);
  ++st.rebinds;
  if (st.engine->version() > valid) st.has_weights = false;  // wait for the new head's
  st.newest_known = std::min(st.newest_known, valid);
  // The node's store forgot the dead head's sets before this message was
  // sent, so whatever it holds now is the new head's.
  if (!st.has_weights && !st.fetch_in_flight) fetch(self, 0, true);
  st.check_segment_above = valid;
  check_segment(self);
  JoinData j = join_data(st);
  j.rejoined = true;
  j.produced = st.produced;
  j.kept = st.pending ? 1 : 0;
  self->send(st.options.coordinator, join_atom::value, WireMsg{encode(j, st.name)}, explorer_actor{self});
  st.options.log->info("{}: rejoined the restarted head ({} segments made so far; dropped as newer than v{}: {} "
                       "waiting for a credit, {} waiting for rewards)",
                       st.name, st.produced, valid, pending_dropped ? 1 : 0, held);
  if (st.pending) {
    auto msg = std::move(*st.pending);
    st.pending.reset();
    send_segment(self, std::move(msg), st.pending_newest);
  }
}

void fetch(Self self, std::uint64_t version, bool latest) {
  auto& st = self->state;
  st.fetch_in_flight = true;
  st.fetch_started = std::chrono::steady_clock::now();
  WireMsg req{encode(WeightRequestData{version, latest}, st.name)};
  self->request(st.options.weight_store, st.options.request_timeout, fetch_atom::value, req)
      .then(
          [self, rebinds = st.rebinds](const WireMsg& msg) {
            auto& st = self->state;
            st.fetch_in_flight = false;
            if (rebinds != st.rebinds) {
              // Asked before a rebind: possibly the dead head's weights. Ask again.
              if (!st.has_weights || st.newest_known > st.engine->version()) fetch(self, 0, true);
              return;
            }
            auto w = decode_or_count<WeightSetData>(self, msg, st.errors, st.options.log);
            if (w && (w->version > st.engine->version() || !st.has_weights)) {
              auto ok = st.engine->load_weights(*w);
              if (!ok) {
                st.errors.add(ok.error().code);
                st.options.log->warn("{}: weights v{} do not fit: {}", st.name, w->version, ok.error().message);
              } else {
                st.has_weights = true;
                double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - st.fetch_started)
                                .count();
                self->send(st.options.coordinator, swap_atom::value, st.options.rollout.explorer_id, us);
              }
            }
            if (st.newest_known > st.engine->version()) return fetch(self, st.newest_known);
            advance(self);
          },
          [self, latest, rebinds = st.rebinds](const caf::error& err) {
            auto& st = self->state;
            st.fetch_in_flight = false;
            if (rebinds != st.rebinds && !latest) return fetch(self, 0, true);
            if (!st.has_weights && st.rebinds > 0) {
              // After a rebind the node's store is empty until the new head's weights arrive (a notification).
              st.options.log->debug("{}: no weights yet after the rebind: {}", st.name, caf::to_string(err));
              return advance(self);
            }
            // The store evicted that version (the explorer fell behind): ask
            // for the newest instead. If the store itself failed, the next
            // notification retries.
            if (!latest) {
              st.options.log->debug("{}: fetching weights failed: {}; asking for the newest", st.name,
                                    caf::to_string(err));
              return fetch(self, 0, true);
            }
            st.options.log->warn("{}: fetching the newest weights failed: {}", st.name, caf::to_string(err));
            advance(self);
          });
}

// Sends the held segments whose deferred rewards are all in, while there is credit.
void release(Self self) {
  auto& st = self->state;
  while (!st.pending) {
    auto seg = st.deferred.ready();
    if (!seg) return;
    // Counted before it leaves: should this node die with the segment in
    // hand or on the wire, the coordinator knows it was lost.
    self->send(st.options.coordinator, produced_atom::value, st.options.rollout.explorer_id, ++st.produced);
    send_segment(self, WireMsg{encode(*seg, st.name)}, seg->newest_version());
  }
}

void scored(Self self, std::uint64_t id, float score, std::string hint = {}) {
  self->state.deferred.scored(id, score, std::move(hint));
  release(self);
  advance(self);
}

// Asks reward worker `worker` (mod the pool) to score deferred episode
// `id`; a failure or silence goes to the next worker in the pool, up to
// reward_attempts in all.
void ask_reward(Self self, std::uint64_t id, const std::string& payload, int attempt, std::size_t worker) {
  auto& st = self->state;
  const auto& pool = st.options.rewards;
  if (pool.empty()) {
    if (!std::exchange(st.warned_no_pool, true))
      st.options.log->warn("{}: the env defers rewards but this node has no reward worker: they score 0", st.name);
    st.errors.add(Errc::not_found);
    // Called from on_step_result, which releases and advances after (no step from in here).
    return st.deferred.scored(id, 0.0f);
  }
  const reward_actor to = pool[worker % pool.size()];
  // "TASK\nOUTPUT" (docs/external-envs.md); no newline: all output.
  const auto nl = payload.find('\n');
  RewardRequestData req{id, st.options.rollout.explorer_id, nl == std::string::npos ? "" : payload.substr(0, nl),
                        nl == std::string::npos ? payload : payload.substr(nl + 1)};
  self->request(to, st.options.reward_timeout, reward_atom::value, WireMsg{encode(req, st.name)})
      .then(
          [self, id](const WireMsg& msg) {
            auto& st = self->state;
            auto res = decode_or_count<RewardResultData>(self, msg, st.errors, st.options.log);
            if (res && res->request_id == id)
              return scored(self, id, res->ok ? res->score : 0.0f, res->ok ? std::move(res->hint) : std::string());
            st.options.log->warn("{}: a reward worker answered request {} with {}: scored 0", st.name, id,
                                 res ? "another request's result" : "a malformed result");
            scored(self, id, 0.0f);
          },
          [self, id, payload, attempt, worker](const caf::error& err) {
            auto& st = self->state;
            if (attempt + 1 < st.options.reward_attempts) {
              st.options.log->info("{}: reward request {} failed ({}); asking another worker", st.name, id,
                                   caf::to_string(err));
              return ask_reward(self, id, payload, attempt + 1, worker + 1);
            }
            st.errors.add(Errc::timeout);
            st.options.log->warn("{}: reward request {} failed {} times (last: {}): scored 0", st.name, id,
                                 st.options.reward_attempts, caf::to_string(err));
            scored(self, id, 0.0f);
          });
}

void on_step_result(Self self, EnvStepResultData* r) {
  auto& st = self->state;
  st.step_in_flight = false;
  if (static_cast<std::int64_t>(r->rewards.size()) != st.options.rollout.num_envs ||
      static_cast<std::int64_t>(r->obs_dim) != st.options.rollout.obs_dim)
    return fail(self, "the env answered with a step result of the wrong shape");
  if (st.started) {
    const bool complete = st.rollout->observe(*r);
    for (const auto& d : st.rollout->deferred())
      ask_reward(self, st.deferred.note(d.sequence, d.t, d.env, d.episode), d.payload, 0, st.next_worker++);
    if (complete) segment_done(self, st.rollout->take_segment());
  }
  st.started = true;
  st.obs = r->observations;
  check_segment(self);
  advance(self);
}

// A finished segment: held for its deferred rewards, then sent.
void segment_done(Self self, Segment seg) {
  auto& st = self->state;
  if (st.check_segment_above && seg.newest_version() > *st.check_segment_above) {
    // Completed by the step that was in flight at a rebind: the dead head's weights.
    st.deferred.forget(seg.sequence);
    st.options.log->info("{}: dropped a segment of {} steps made with weights newer than v{}", st.name,
                         seg.num_steps, *std::exchange(st.check_segment_above, std::nullopt));
    return;
  }
  if (st.options.sync) st.sync_wait_for = seg.policy_versions.back() + 1;
  st.deferred.finished(std::move(seg));
  release(self);
}

// One decoding step of the token policy (a message of its own, so weight
// swaps and drains come between any two tokens).
void on_token_step(Self self) {
  auto& st = self->state;
  st.step_in_flight = false;
  auto complete = st.tokens->step();
  if (!complete) return fail(self, complete.error().message);
  if (*complete) {
    Segment seg = st.tokens->take_segment();
    for (const auto& d : st.tokens->deferred())
      ask_reward(self, st.deferred.note(d.sequence, d.t, d.env, d.episode), d.payload, 0, st.next_worker++);
    segment_done(self, std::move(seg));
  }
  check_segment(self);
  advance(self);
}

void on_step_reply(Self self, const WireMsg& msg) {
  auto& st = self->state;
  auto r = decode_or_count<EnvStepResultData>(self, msg, st.errors, st.options.log);
  if (!r) {
    st.step_in_flight = false;
    return fail(self, "the env answered with a malformed step result");
  }
  on_step_result(self, &*r);
}

// Takes the next step unless something holds the explorer back.
void advance(Self self) {
  auto& st = self->state;
  // Every step is labelled with the version that chose it, so the first
  // step waits for the learner's weights.
  if (st.step_in_flight) return;
  // Draining: the segment in hand is finished and sent (its credit awaited), then it leaves.
  const bool in_hand = st.started && st.has_weights && st.engine->steps_in_segment() > 0;
  if (st.draining && !in_hand) {
    // Held segments wait for their rewards (each request ends: answered, re-asked or given up).
    if (!st.pending && st.deferred.held() == 0) return leave(self, "drained");
    return;
  }
  if (!st.started || !st.has_weights || st.paused) return;
  if (st.pending) return;  // no credit: wait for an ack
  if (st.engine->steps_in_segment() == 0) {
    const auto v = st.engine->version();
    if (st.newest_known > v + st.options.max_staleness) return;  // fetch first (pacing)
    if (st.options.sync && v < st.sync_wait_for) return;         // sync: wait for the next version
    if (st.deferred.held() >= st.options.max_held) return;       // rewards first
  }
  st.step_in_flight = true;
  if (st.tokens) {
    self->send(self, stepped_atom::value);  // the decoding step runs there
    return;
  }
  const auto& actions = st.rollout->act(st.obs);
  if (st.local) {
    try {
      st.local->step(actions, st.result);
    } catch (const EnvFailure& e) {
      return fail(self, e.what());
    }
    self->send(self, stepped_atom::value);  // back through the mailbox: swaps and drains come between steps
    return;
  }
  WireMsg step{encode(EnvStepData{actions, ++st.step_index}, st.name)};
  self->request(st.options.env, st.options.request_timeout, step_atom::value, step)
      .then([self](const WireMsg& msg) { on_step_reply(self, msg); },
            [self](const caf::error& err) { fail(self, "env step failed: " + caf::to_string(err)); });
}

// The message handlers (shared by the normal start and a failed one).
explorer_actor::behavior_type explorer_behavior(Self self) {
  return {
      [self](weights_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto note = decode_or_count<WeightsAvailableData>(self, msg, st.errors, st.options.log);
        if (!note) return;
        st.newest_known = std::max(st.newest_known, note->version);
        const bool behind = st.newest_known > st.engine->version() || !st.has_weights;
        if (behind && !st.fetch_in_flight) fetch(self, st.newest_known);
      },
      [self](ack_atom) {
        auto& st = self->state;
        ++st.credits;
        if (st.pending) {
          auto msg = std::move(*st.pending);
          st.pending.reset();
          send_segment(self, std::move(msg), st.pending_newest);
        }
        release(self);
        advance(self);
      },
      [self](drain_atom) {
        self->state.draining = true;
        advance(self);
      },
      [self](stepped_atom) {
        auto& st = self->state;
        if (st.tokens && st.step_in_flight) return on_token_step(self);
        if (!st.local || !st.step_in_flight) return;  // not ours: ignore
        on_step_result(self, &st.result);
      },
      [self](pause_atom) { self->state.paused = true; },
      [self](rebind_atom, learner_actor learner, caf::actor coordinator, std::uint64_t valid) {
        rebind(self, std::move(learner), caf::actor_cast<coordinator_actor>(coordinator), valid);
        advance(self);
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

}  // namespace

explorer_actor::behavior_type explorer_impl(Self self, ExplorerActorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.name = "explorer/" + std::to_string(st.options.rollout.explorer_id);
  st.credits = st.options.credits;
  self->send(st.options.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  if (st.options.tokens) {
    // The token policy decodes its own tasks: no environment to reset.
    st.tokens = std::make_unique<TokenRollout>(*st.options.tokens);
    st.engine = st.tokens.get();
    st.started = true;
    self->send(st.options.coordinator, join_atom::value, WireMsg{encode(join_data(st), st.name)}, explorer_actor{self});
    return explorer_behavior(self);
  }
  st.rollout = std::make_unique<Rollout>(st.options.rollout);
  st.engine = st.rollout.get();
  if (st.options.local_env) {
    try {
      st.local = st.options.local_env(st.options.env_seed, st.options.first_env_id,
                                      static_cast<int>(st.options.rollout.num_envs));
    } catch (const EnvFailure& e) {
      fail(self, e.what());  // quits after this function; st.local stays empty
    }
  } else {
    self->monitor(st.options.env);
    self->set_down_handler([self](const caf::down_msg& dm) {
      if (dm.source == self->state.options.env.address()) fail(self, "its env actor died");
    });
  }
  self->send(st.options.coordinator, join_atom::value, WireMsg{encode(join_data(st), st.name)}, explorer_actor{self});
  if (st.options.local_env) {
    if (!st.local) return explorer_behavior(self);
    try {
      st.local->reset(st.result);
    } catch (const EnvFailure& e) {
      fail(self, e.what());
    }
    st.step_in_flight = true;
    self->send(self, stepped_atom::value);
  } else {
    EnvResetData reset{st.options.env_seed, static_cast<std::uint32_t>(st.options.rollout.num_envs)};
    self->request(st.options.env, st.options.request_timeout, reset_atom::value, WireMsg{encode(reset, st.name)})
        .then([self](const WireMsg& msg) { on_step_reply(self, msg); },
              [self](const caf::error& err) { fail(self, "env reset failed: " + caf::to_string(err)); });
  }
  return explorer_behavior(self);
}

explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options) {
  return system.spawn(explorer_impl, std::move(options));
}

}  // namespace rlx
