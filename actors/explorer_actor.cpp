#include "actors/explorer_actor.hpp"

#include "actors/guard.hpp"
#include "explorers/explorer_loop.hpp"
#include "explorers/explorer_work.hpp"

namespace rlx {

// The wiring of an explorer: its compute (ExplorerWork), its decisions
// (ExplorerLoop) and the handles it talks to.
struct ExplorerState {
  ExplorerActorOptions options;
  std::unique_ptr<ExplorerWork> work;     // its compute: a Rollout and its envs, or a TokenRollout
  std::unique_ptr<ExplorerLoop> loop;     // its decisions, over that compute
  std::string name;
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
            if (out.why == ExplorerLoop::FetchFailure::newest_failed)
              st.options.log->warn("{}: fetching the newest weights failed: {}", st.name, said);
            else if (out.why != ExplorerLoop::FetchFailure::before_rebind)
              st.options.log->debug("{}: fetching weights v{} failed: {}; {}", st.name, f.version, said,
                                    out.next ? "asking for the newest" : "waiting for the next announcement");
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
  const RewardRequestData req = reward_request(ask.id, st.options.rollout.explorer_id, payload);
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

// What a step gave: rewards to ask for, a segment to hand on.
void stepped(Self self, Result<WorkStep> out) {
  auto& st = self->state;
  if (!out) return fail(self, out.error().message);
  ask_rewards(self, out->deferred);
  if (out->segment) segment_done(self, std::move(*out->segment));
  st.loop->started();
  check_segment(self);
  advance(self);
}

void on_step_reply(Self self, const WireMsg& msg) {
  auto& st = self->state;
  st.loop->step_done();
  auto r = decode_or_count<EnvStepResultData>(self, msg, st.errors, st.options.log);
  if (!r) return fail(self, "the env answered with a malformed step result");
  stepped(self, st.work->observe(*r, st.loop->is_started()));
}

// Takes the next step unless the loop holds the explorer back.
void advance(Self self) {
  auto& st = self->state;
  switch (st.loop->next()) {
    case ExplorerLoop::Next::wait: return;
    case ExplorerLoop::Next::leave: return leave(self, "drained");
    case ExplorerLoop::Next::step: break;
  }
  if (st.work->steps_here()) {
    // Back through the mailbox: swaps and drains come between any two steps.
    if (!st.work->tokens())
      if (auto r = st.work->step_local(); !r) return fail(self, r.error().message);
    self->send(self, stepped_atom::value);
    return;
  }
  WireMsg step{encode(st.work->step_request(), st.name)};
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
        if (!st.loop->step_in_flight() || !st.work->steps_here()) return;  // not ours: ignore
        st.loop->step_done();
        stepped(self, st.work->tokens() ? st.work->token_step() : st.work->observe_local(st.loop->is_started()));
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
  const auto& o = st.options;
  st.name = "explorer/" + std::to_string(o.rollout.explorer_id);
  st.work = std::make_unique<ExplorerWork>(
      ExplorerWorkOptions{o.rollout, o.tokens, o.tokens ? BatchEnvFactory{} : o.local_env, o.env_seed, o.first_env_id});
  st.loop = std::make_unique<ExplorerLoop>(loop_options(o), st.work->source());
  self->send(o.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  self->send(o.coordinator, join_atom::value, WireMsg{encode(join_data(st), st.name)}, explorer_actor{self});
  if (o.tokens) {
    st.loop->started();  // the token policy decodes its own tasks: no environment to reset
  } else if (st.work->steps_here()) {
    if (auto r = st.work->start_local(); !r) fail(self, r.error().message);  // quits after this function
    else {
      st.loop->reset_sent();  // its result comes back as a step
      self->send(self, stepped_atom::value);
    }
  } else {
    self->monitor(o.env);
    self->set_down_handler([self](const caf::down_msg& dm) {
      if (dm.source == self->state.options.env.address()) fail(self, "its env actor died");
    });
    self->request(o.env, o.request_timeout, reset_atom::value, WireMsg{encode(st.work->reset_request(), st.name)})
        .then([self](const WireMsg& msg) { on_step_reply(self, msg); },
              [self](const caf::error& err) { fail(self, "env reset failed: " + self->system().render(err)); });
  }
  return explorer_behavior(self);
}

explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options) {
  return system.spawn(explorer_impl, std::move(options));
}

}  // namespace rlx
