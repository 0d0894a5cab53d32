#include "actors/evaluator_actor.hpp"

#include <optional>

#include <fmt/format.h>

#include "actors/guard.hpp"
#include "explorers/token_eval.hpp"
#include "explorers/weight_follower.hpp"

namespace rlx {

namespace {

struct EvaluatorState {
  EvaluatorOptions options;
  std::unique_ptr<HeldOutEvaluator> evaluator;
  WeightFollower follower;  // held: the version scored last
  ErrorCounts errors;
};

using Self = evaluator_actor::stateful_pointer<EvaluatorState>;

void evaluate(Self self, const WeightSetData& w) {
  auto& st = self->state;
  const auto t0 = std::chrono::steady_clock::now();
  auto ev = st.evaluator->evaluate(w);
  if (!ev) {
    st.errors.add(ev.error().code);
    st.options.log->warn("evaluator: weights v{} do not fit: {}", w.version, ev.error().message);
    return;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.follower.hold(w.version);
  st.options.log->info("evaluator: v{} held-out pass@1 {:.3f} (tests passed {:.3f}, {} tasks, {:.1f} s; {}){}{}",
                       w.version, ev->pass_at_1, ev->mean_score, ev->tasks, s, family_summary(*ev),
                       ev->train_tasks == 0 ? std::string()
                                            : fmt::format("; fresh training tasks pass@1 {:.3f} (tests passed {:.3f}, "
                                                          "{} tasks); per episode {:.1f} turns, {:.1f} tool calls, "
                                                          "{:.1f} bad calls; a hole's file opened in {:.2f} of "
                                                          "held-out and {:.2f} of fresh training episodes, a "
                                                          "hole's body rewritten in {:.2f} and {:.2f}; how "
                                                          "episodes ended, held-out: {}; fresh training: {}",
                                                          ev->train_pass_at_1, ev->train_mean_score, ev->train_tasks,
                                                          ev->mean_turns, ev->mean_tool_calls, ev->mean_bad_calls,
                                                          ev->found_hole, ev->train_found_hole, ev->rewrote_hole,
                                                          ev->train_rewrote_hole, outcome_summary(ev->outcomes),
                                                          outcome_summary(ev->train_outcomes)),
                       ev->samples.empty() ? "" : "; e.g. " + ev->samples.front());
  for (const auto& episode : ev->episodes) st.options.log->debug("evaluator: v{} episode {}", w.version, episode);
  self->send(st.options.coordinator, eval_atom::value, w.version, ev->pass_at_1, ev->mean_score,
             static_cast<std::uint32_t>(ev->tasks));
}

// Scores the newest version once eval_every versions have passed since
// the last one scored (the first heard of, always).
void maybe_evaluate(Self self) {
  auto& st = self->state;
  auto& f = st.follower;
  if (f.fetch_in_flight()) return;
  if (f.held() && f.newest() < *f.held() + static_cast<std::uint64_t>(st.options.tokens.eval_every)) return;
  const auto epoch = f.fetch_started();
  WireMsg req{encode(WeightRequestData{0, true}, "evaluator")};
  self->request(st.options.weight_store, st.options.request_timeout, fetch_atom::value, req)
      .then(
          [self, epoch](const WireMsg& msg) {
            auto& st = self->state;
            st.follower.fetched(epoch);
            auto w = decode_or_count<WeightSetData>(self, msg, st.errors, st.options.log, st.options.weights);
            if (w && (!st.follower.held() || w->version > *st.follower.held())) evaluate(self, *w);
            maybe_evaluate(self);
          },
          [self, epoch](const caf::error& err) {
            auto& st = self->state;
            st.follower.fetched(epoch);
            st.options.log->warn("evaluator: fetching the newest weights failed: {}", self->system().render(err));
          });
}

evaluator_actor::behavior_type evaluator_impl(Self self, EvaluatorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  TokenEvalOptions eo;
  eo.kind = st.options.kind;
  eo.tasks = static_cast<int>(st.options.tokens.eval_tasks);
  eo.max_new_tokens = st.options.tokens.max_new_tokens;
  eo.agent = st.options.tokens;
  st.evaluator = std::make_unique<HeldOutEvaluator>(st.options.policy, eo, st.options.scorer);
  self->send(st.options.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  return {
      [self](weights_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto note = decode_or_count<WeightsAvailableData>(self, msg, st.errors, st.options.log);
        if (!note) return;
        st.follower.announced(note->version);
        maybe_evaluate(self);
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

}  // namespace

evaluator_actor spawn_evaluator(caf::actor_system& system, EvaluatorOptions options) {
  return system.spawn(evaluator_impl, std::move(options));
}

}  // namespace rlx
