#include "actors/explorer_actor.hpp"

#include <optional>

#include "actors/guard.hpp"
#include "explorers/explorer_loop.hpp"

namespace rlx {

// The wiring of an explorer: its compute (a Rollout or a TokenRollout), its
// decisions (ExplorerLoop) and the handles it talks to.
struct ExplorerState {
  ExplorerActorOptions options;
  std::unique_ptr<Rollout> rollout;       // vector observations and environments, or
  std::unique_ptr<TokenRollout> tokens;   // the token policy's own decoding
  std::unique_ptr<ExplorerLoop> loop;     // over whichever of the two
  std::unique_ptr<BatchEnv> local;        // set when the envs live in this actor
  EnvStepResultData result;               // the last local step
  std::string name;
  std::vector<float> obs;                 // current observations [B, D]
  std::uint64_t step_index = 0;
  std::chrono::steady_clock::time_point fetch_started;
  ErrorCounts errors;
};

namespace {

using Self = explorer_actor::stateful_pointer<ExplorerState>;

void advance(Self self);
void fetch(Self self, const WeightFetch& f);

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

// Sends what the loop released: counts to the coordinator, segments to the learner.
void flush(Self self) {
  auto& st = self->state;
  for (auto& out : st.loop->take_outbox()) {
    if (out.kind == Outgoing::Kind::produced)
      self->send(st.options.coordinator, produced_atom::value, st.options.rollout.explorer_id, out.produced);
    else
      self->send(st.options.learner, segment_atom::value, WireMsg{encode(out.segment, st.name)});
  }
}

JoinData join_data(const ExplorerState& st) {
  JoinData j{Role::explorer, st.options.node, st.options.rollout.explorer_id, {}};
  j.first_env_id = st.options.first_env_id;
  j.num_envs = static_cast<std::uint32_t>(st.options.rollout.num_envs);
  return j;
}

void check_segment(Self self) {
  auto& st = self->state;
  if (const auto steps = st.loop->check_segment())
    st.options.log->info("{}: dropped the {} steps in hand (made with the dead head's newer weights)", st.name, steps);
}

void rebind(Self self, learner_actor learner, coordinator_actor coordinator, std::uint64_t valid) {
  auto& st = self->state;
  st.options.learner = learner;
  st.options.coordinator = coordinator;
  const auto r = st.loop->rebind(valid);
  if (r.fetch) fetch(self, *r.fetch);
  if (r.dropped_steps)
    st.options.log->info("{}: dropped the {} steps in hand (made with weights newer than v{})", st.name,
                         r.dropped_steps, valid);
  JoinData j = join_data(st);
  j.rejoined = true;
  j.produced = r.produced;
  j.kept = r.kept;
  self->send(st.options.coordinator, join_atom::value, WireMsg{encode(j, st.name)}, explorer_actor{self});
  st.options.log->info("{}: rejoined the restarted head ({} segments made so far; dropped as newer than v{}: {} "
                       "waiting for a credit, {} waiting for rewards)",
                       st.name, r.produced, valid, r.pending_dropped ? 1 : 0, r.held_dropped);
  flush(self);
}

void fetch(Self self, const WeightFetch& f) {
  auto& st = self->state;
  st.fetch_started = std::chrono::steady_clock::now();
  WireMsg req{encode(WeightRequestData{f.version, f.latest}, st.name)};
  self->request(st.options.weight_store, st.options.request_timeout, fetch_atom::value, req)
      .then(
          [self, f](const WireMsg& msg) {
            auto& st = self->state;
            auto w = decode_or_count<WeightSetData>(self, msg, st.errors, st.options.log);
            const auto out = st.loop->fetched(f, w ? &*w : nullptr);
            if (out.rejected) {
              st.errors.add(out.rejected->code);
              st.options.log->warn("{}: weights v{} do not fit: {}", st.name, w->version, out.rejected->message);
            }
            if (out.loaded) {
              const double us =
                  std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - st.fetch_started).count();
              self->send(st.options.coordinator, swap_atom::value, st.options.rollout.explorer_id, us);
            }
            if (out.next) return fetch(self, *out.next);
            advance(self);
          },
          [self, f](const caf::error& err) {
            auto& st = self->state;
            const Error why = from_caf(err);  // the store's own code (not_found: evicted or none yet)
            const auto out = st.loop->fetch_failed(f, why.code);
            const std::string said = std::string(to_string(why.code)) + ": " + why.message;
            switch (out.why) {
              case ExplorerLoop::FetchFailure::before_rebind: break;
              case ExplorerLoop::FetchFailure::empty_after_rebind:
                st.options.log->debug("{}: no weights yet after the rebind: {}", st.name, said);
                break;
              case ExplorerLoop::FetchFailure::evicted:
              case ExplorerLoop::FetchFailure::exact_failed:
                st.options.log->debug("{}: fetching weights failed: {}; asking for the newest", st.name, said);
                break;
              case ExplorerLoop::FetchFailure::newest_failed:
                st.options.log->warn("{}: fetching the newest weights failed: {}", st.name, said);
                break;
            }
            if (out.next) return fetch(self, *out.next);
            advance(self);
          });
}

void scored(Self self, std::uint64_t id, float score, std::string hint = {}) {
  self->state.loop->scored(id, score, std::move(hint));
  flush(self);
  advance(self);
}

// Asks a reward worker to score a deferred episode; a failure or silence
// goes to the next worker in the pool, as the loop says.
void ask_reward(Self self, const RewardAsk& ask, const std::string& payload) {
  auto& st = self->state;
  const auto& pool = st.options.rewards;
  const reward_actor to = pool[ask.worker % pool.size()];
  // "TASK\nOUTPUT" (docs/external-envs.md); no newline: all output.
  const auto nl = payload.find('\n');
  RewardRequestData req{ask.id, st.options.rollout.explorer_id, nl == std::string::npos ? "" : payload.substr(0, nl),
                        nl == std::string::npos ? payload : payload.substr(nl + 1)};
  self->request(to, st.options.reward_timeout, reward_atom::value, WireMsg{encode(req, st.name)})
      .then(
          [self, id = ask.id](const WireMsg& msg) {
            auto& st = self->state;
            auto res = decode_or_count<RewardResultData>(self, msg, st.errors, st.options.log);
            if (res && res->request_id == id)
              return scored(self, id, res->ok ? res->score : 0.0f, res->ok ? std::move(res->hint) : std::string());
            st.options.log->warn("{}: a reward worker answered request {} with {}: scored 0", st.name, id,
                                 res ? "another request's result" : "a malformed result");
            scored(self, id, 0.0f);
          },
          [self, ask, payload](const caf::error& err) {
            auto& st = self->state;
            if (auto again = st.loop->reward_failed(ask)) {
              st.options.log->info("{}: reward request {} failed ({}); asking another worker", st.name, ask.id,
                                   self->system().render(err));
              return ask_reward(self, *again, payload);
            }
            st.errors.add(Errc::timeout);
            st.options.log->warn("{}: reward request {} failed {} times (last: {}): scored 0", st.name, ask.id,
                                 st.options.reward_attempts, self->system().render(err));
            flush(self);
            advance(self);
          });
}

// The episodes of the last step whose rewards are deferred, each asked of the pool.
void ask_rewards(Self self, const std::vector<Rollout::DeferredEpisode>& episodes) {
  auto& st = self->state;
  for (const auto& d : episodes) {
    if (auto ask = st.loop->deferred(d.sequence, d.t, d.env, d.episode)) {
      ask_reward(self, *ask, d.payload);
      continue;
    }
    st.errors.add(Errc::not_found);
    if (st.loop->no_pool_warning())
      st.options.log->warn("{}: the env defers rewards but this node has no reward worker: they score 0", st.name);
  }
}

void segment_done(Self self, Segment seg) {
  auto& st = self->state;
  const auto steps = seg.num_steps;
  if (!st.loop->segment_done(std::move(seg)))
    st.options.log->info("{}: dropped a segment of {} steps made with the dead head's newer weights", st.name, steps);
  flush(self);
}

void on_step_result(Self self, EnvStepResultData* r) {
  auto& st = self->state;
  st.loop->step_done();
  if (static_cast<std::int64_t>(r->rewards.size()) != st.options.rollout.num_envs ||
      static_cast<std::int64_t>(r->obs_dim) != st.options.rollout.obs_dim)
    return fail(self, "the env answered with a step result of the wrong shape");
  if (st.loop->is_started()) {
    const bool complete = st.rollout->observe(*r);
    ask_rewards(self, st.rollout->deferred());
    if (complete) segment_done(self, st.rollout->take_segment());
  }
  st.loop->started();
  st.obs = r->observations;
  check_segment(self);
  advance(self);
}

// One decoding step of the token policy (a message of its own, so weight
// swaps and drains come between any two tokens).
void on_token_step(Self self) {
  auto& st = self->state;
  st.loop->step_done();
  auto complete = st.tokens->step();
  if (!complete) return fail(self, complete.error().message);
  if (*complete) {
    Segment seg = st.tokens->take_segment();
    ask_rewards(self, st.tokens->deferred());
    segment_done(self, std::move(seg));
  }
  check_segment(self);
  advance(self);
}

void on_step_reply(Self self, const WireMsg& msg) {
  auto& st = self->state;
  auto r = decode_or_count<EnvStepResultData>(self, msg, st.errors, st.options.log);
  if (!r) {
    st.loop->step_done();
    return fail(self, "the env answered with a malformed step result");
  }
  on_step_result(self, &*r);
}

// Takes the next step unless the loop holds the explorer back.
void advance(Self self) {
  auto& st = self->state;
  switch (st.loop->next()) {
    case ExplorerLoop::Next::wait: return;
    case ExplorerLoop::Next::leave: return leave(self, "drained");
    case ExplorerLoop::Next::step: break;
  }
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
            [self](const caf::error& err) { fail(self, "env step failed: " + self->system().render(err)); });
}

explorer_actor::behavior_type explorer_behavior(Self self) {
  return {
      [self](weights_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto note = decode_or_count<WeightsAvailableData>(self, msg, st.errors, st.options.log);
        if (!note) return;
        if (auto f = st.loop->announced(note->version)) fetch(self, *f);
      },
      [self](ack_atom) {
        self->state.loop->ack();
        flush(self);
        advance(self);
      },
      [self](drain_atom) {
        self->state.loop->drain();
        advance(self);
      },
      [self](stepped_atom) {
        auto& st = self->state;
        if (!st.loop->step_in_flight()) return;  // not ours: ignore
        if (st.tokens) return on_token_step(self);
        if (st.local) on_step_result(self, &st.result);
      },
      [self](pause_atom) { self->state.loop->pause(); },
      [self](rebind_atom, learner_actor learner, caf::actor coordinator, std::uint64_t valid) {
        rebind(self, std::move(learner), caf::actor_cast<coordinator_actor>(coordinator), valid);
        advance(self);
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

ExplorerLoopOptions loop_options(const ExplorerActorOptions& o) {
  ExplorerLoopOptions l;
  l.max_staleness = o.max_staleness;
  l.sync = o.sync;
  l.credits = o.credits;
  l.max_held = o.max_held;
  l.reward_workers = o.rewards.size();
  l.reward_attempts = o.reward_attempts;
  return l;
}

}  // namespace

explorer_actor::behavior_type explorer_impl(Self self, ExplorerActorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.name = "explorer/" + std::to_string(st.options.rollout.explorer_id);
  self->send(st.options.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  if (st.options.tokens) {
    // The token policy decodes its own tasks: no environment to reset.
    st.tokens = std::make_unique<TokenRollout>(*st.options.tokens);
    st.loop = std::make_unique<ExplorerLoop>(loop_options(st.options), *st.tokens);
    st.loop->started();
    self->send(st.options.coordinator, join_atom::value, WireMsg{encode(join_data(st), st.name)}, explorer_actor{self});
    return explorer_behavior(self);
  }
  st.rollout = std::make_unique<Rollout>(st.options.rollout);
  st.loop = std::make_unique<ExplorerLoop>(loop_options(st.options), *st.rollout);
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
    st.loop->reset_sent();  // its result comes back as a step
    self->send(self, stepped_atom::value);
  } else {
    EnvResetData reset{st.options.env_seed, static_cast<std::uint32_t>(st.options.rollout.num_envs)};
    self->request(st.options.env, st.options.request_timeout, reset_atom::value, WireMsg{encode(reset, st.name)})
        .then([self](const WireMsg& msg) { on_step_reply(self, msg); },
              [self](const caf::error& err) { fail(self, "env reset failed: " + self->system().render(err)); });
  }
  return explorer_behavior(self);
}

explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options) {
  return system.spawn(explorer_impl, std::move(options));
}

}  // namespace rlx
