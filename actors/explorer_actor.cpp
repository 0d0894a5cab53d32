#include "actors/explorer_actor.hpp"

#include "actors/guard.hpp"

namespace rlx {

// The wiring of an explorer: its compute (ExplorerWork), its decisions
// (ExplorerLoop) and the handles it talks to.
struct ExplorerState {
  ExplorerActorOptions options;
  std::unique_ptr<ExplorerWork> work;  // its compute: a Rollout and its envs, or a TokenRollout
  std::unique_ptr<ExplorerLoop> loop;  // its decisions, over that compute
  std::string name;
  std::chrono::steady_clock::time_point fetch_started;
  ErrorCounts errors;
};

namespace {

using Self = explorer_actor::stateful_pointer<ExplorerState>;

void advance(Self self);

void leave(Self self, const std::string& reason) {
  auto& st = self->state;
  LeaveData l{Role::explorer, st.options.work.rollout.explorer_id, reason, st.loop->sent()};
  self->send(st.options.coordinator, leave_atom::value, WireMsg{encode(l, st.name)});
  self->quit();
}

void fail(Self self, const std::string& what) {
  self->state.options.log->error("{}: {}; leaving", self->state.name, what);
  self->quit(caf::sec::runtime_error);
}

// Logs what the loop noted, and sends what it released: counts to the
// coordinator, segments to the learner.
void flush(Self self) {
  auto& st = self->state;
  for (const auto& n : st.loop->take_notes()) st.options.log->log(n.level, "{}: {}", st.name, n.text);
  for (auto& out : st.loop->take_outbox()) {
    if (out.kind == Outgoing::Kind::produced)
      self->send(st.options.coordinator, produced_atom::value, st.options.work.rollout.explorer_id, out.produced);
    else
      self->send(st.options.learner, segment_atom::value, WireMsg{encode(out.segment, st.name)});
  }
}

void join(Self self, const ExplorerLoop::Rebound* rejoin = nullptr) {
  auto& st = self->state;
  JoinData j{Role::explorer, st.options.node, st.options.work.rollout.explorer_id, {}};
  j.first_env_id = st.options.work.first_env_id;
  j.num_envs = static_cast<std::uint32_t>(st.options.work.rollout.num_envs);
  if (rejoin) j.rejoined = true, j.produced = rejoin->produced, j.kept = rejoin->kept;
  self->send(st.options.coordinator, join_atom::value, WireMsg{encode(j, st.name)}, explorer_actor{self});
}

void fetch(Self self, const WeightFetch& f) {
  auto& st = self->state;
  st.fetch_started = std::chrono::steady_clock::now();
  WireMsg req{encode(WeightRequestData{f.version, f.latest}, st.name)};
  auto then = [self](const std::optional<WeightFetch>& next) {
    flush(self);
    if (next) return fetch(self, *next);
    advance(self);
  };
  self->request(st.options.weight_store, st.options.request_timeout, fetch_atom::value, req)
      .then(
          [self, f, then](const WireMsg& msg) {
            auto& st = self->state;
            auto w = decode_or_count<WeightSetData>(self, msg, st.errors, st.options.log, st.options.weights);
            const auto out = st.loop->fetched(f, w ? &*w : nullptr);
            if (out.rejected) st.errors.add(out.rejected->code);
            if (out.loaded)
              self->send(st.options.coordinator, swap_atom::value, st.options.work.rollout.explorer_id,
                         std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - st.fetch_started)
                             .count());
            then(out.next);
          },
          [self, f, then](const caf::error& err) {
            const Error why = from_caf(err);  // the store's own code (not_found: evicted or none yet)
            then(self->state.loop->fetch_failed(f, why.code, why.message).next);
          });
}

// Asks a reward worker to score a deferred episode; what comes of it
// (scored, asked again, masked) is the loop's to say.
void ask_reward(Self self, const RewardAsk& ask, const std::string& payload) {
  auto& st = self->state;
  const auto& pool = st.options.rewards;
  const RewardRequestData req = reward_request(ask.id, st.options.work.rollout.explorer_id, payload);
  auto then = [self, payload](const ExplorerLoop::RewardNext& next) {
    if (next.failure != InfraFailure::none && !next.again) self->state.errors.add(Errc::timeout);  // given up
    flush(self);
    if (next.again) return ask_reward(self, *next.again, payload);
    advance(self);
  };
  const auto asked = std::chrono::steady_clock::now();
  self->request(pool[ask.worker % pool.size()], st.options.reward_timeout, reward_atom::value, WireMsg{encode(req, st.name)})
      .then(
          [self, ask, then, asked](const WireMsg& msg) {
            auto& st = self->state;
            // The round trip of an answered request (a refusal too: it is the reward path's latency).
            self->send(st.options.coordinator, reward_latency_atom::value, st.options.work.rollout.explorer_id,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
            auto res = decode_or_count<RewardResultData>(self, msg, st.errors, st.options.log);
            then(st.loop->answered(ask, res ? &*res : nullptr));
          },
          [self, ask, then](const caf::error& err) {
            then(self->state.loop->reward_failed(ask, self->system().render(err)));
          });
}

// What a step gave: rewards to ask for, a segment to hand on.
void stepped(Self self, Result<WorkStep> out) {
  auto& st = self->state;
  if (!out) return fail(self, out.error().message);
  for (const auto& d : out->deferred)
    if (auto ask = st.loop->deferred(d.sequence, d.t, d.env, d.episode)) ask_reward(self, *ask, d.payload);
  if (out->segment) st.loop->segment_done(std::move(*out->segment));
  st.loop->started();
  st.loop->check_segment();
  flush(self);
  advance(self);
}

void on_env_reply(Self self, const WireMsg& msg) {
  auto& st = self->state;
  st.loop->step_done();
  auto r = decode_or_count<EnvStepResultData>(self, msg, st.errors, st.options.log);
  if (!r) return fail(self, "the env answered with a malformed step result");
  stepped(self, st.work->observe(*r, st.loop->is_started()));
}

// The env actor's reset (first) or next step; its reply comes back as a step.
template <class Atom>
void ask_env(Self self, Atom atom, WireBuffer request) {
  auto& st = self->state;
  self->request(st.options.env, st.options.request_timeout, atom, WireMsg{std::move(request)})
      .then([self](const WireMsg& msg) { on_env_reply(self, msg); },
            [self](const caf::error& err) { fail(self, "env request failed: " + self->system().render(err)); });
}

// Takes the next step unless the loop holds the explorer back.
void advance(Self self) {
  auto& st = self->state;
  switch (st.loop->next()) {
    case ExplorerLoop::Next::wait: return;
    case ExplorerLoop::Next::leave: return leave(self, "drained");
    case ExplorerLoop::Next::step: break;
  }
  if (!st.work->steps_here()) return ask_env(self, step_atom::value, encode(st.work->step_request(), st.name));
  // Back through the mailbox: swaps and drains come between any two steps.
  if (auto r = st.work->begin_step_here(); !r) return fail(self, r.error().message);
  self->send(self, stepped_atom::value);
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
        stepped(self, st.work->finish_step_here(st.loop->is_started()));
      },
      [self](pause_atom) { self->state.loop->pause(); },
      [self](rebind_atom, learner_actor learner, caf::actor coordinator, std::uint64_t valid) {
        // A restarted head: what the dead one's newer weights made goes;
        // the explorer rejoins with its counts.
        auto& st = self->state;
        st.options.learner = std::move(learner);
        st.options.coordinator = caf::actor_cast<coordinator_actor>(coordinator);
        const auto r = st.loop->rebind(valid);
        if (r.fetch) fetch(self, *r.fetch);
        join(self, &r);
        flush(self);
        advance(self);
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

}  // namespace

explorer_actor::behavior_type explorer_impl(Self self, ExplorerActorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.options.loop.reward_workers = st.options.rewards.size();
  const auto& o = st.options;
  st.name = "explorer/" + std::to_string(o.work.rollout.explorer_id);
  st.work = std::make_unique<ExplorerWork>(o.work);
  st.loop = std::make_unique<ExplorerLoop>(o.loop, st.work->source());
  self->send(o.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  join(self);
  if (!st.work->steps_here()) {
    self->monitor(o.env);
    self->set_down_handler([self](const caf::down_msg& dm) {
      if (dm.source == self->state.options.env.address()) fail(self, "its env actor died");
    });
    ask_env(self, reset_atom::value, encode(st.work->reset_request(), st.name));
  } else if (auto first = st.work->start_here(); !first) {
    fail(self, first.error().message);  // quits after this function
  } else if (*first) {
    st.loop->reset_sent();  // local envs: their first observations come back as a step
    self->send(self, stepped_atom::value);
  } else {
    st.loop->started();  // the token policy decodes its own tasks: no environment to reset
  }
  return explorer_behavior(self);
}

explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options) {
  return system.spawn(explorer_impl, std::move(options));
}

}  // namespace rlx
