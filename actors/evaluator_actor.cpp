#include "actors/evaluator_actor.hpp"

#include <optional>

#include "actors/guard.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "explorers/token_eval.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

struct EvaluatorState {
  EvaluatorOptions options;
  MoETransformer model{nullptr};
  std::uint64_t newest_known = 0;
  std::optional<std::uint64_t> last;  // the version scored last
  bool busy = false;
  ErrorCounts errors;
};

using Self = evaluator_actor::stateful_pointer<EvaluatorState>;

void maybe_evaluate(Self self);

void evaluate(Self self, const WeightSetData& w) {
  auto& st = self->state;
  if (auto ok = import_weights(*st.model, w); !ok) {
    st.errors.add(ok.error().code);
    st.options.log->warn("evaluator: weights v{} do not fit: {}", w.version, ok.error().message);
    return;
  }
  TokenEvalOptions eo;
  eo.kind = st.options.kind;
  eo.tasks = static_cast<int>(st.options.tokens.eval_tasks);
  eo.max_new_tokens = st.options.tokens.max_new_tokens;
  const auto t0 = std::chrono::steady_clock::now();
  const TokenEvaluation ev = evaluate_tokens(st.model, *st.options.scorer, eo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.last = w.version;
  st.options.log->info("evaluator: v{} held-out pass@1 {:.3f} (tests passed {:.3f}, {} tasks, {:.1f} s; {}){}",
                       w.version, ev.pass_at_1, ev.mean_score, ev.tasks, s, family_summary(ev),
                       ev.samples.empty() ? "" : "; e.g. " + ev.samples.front());
  self->send(st.options.coordinator, eval_atom::value, w.version, ev.pass_at_1, ev.mean_score,
             static_cast<std::uint32_t>(ev.tasks));
}

void maybe_evaluate(Self self) {
  auto& st = self->state;
  if (st.busy) return;
  if (st.last && st.newest_known < *st.last + static_cast<std::uint64_t>(st.options.tokens.eval_every)) return;
  st.busy = true;
  WireMsg req{encode(WeightRequestData{0, true}, "evaluator")};
  self->request(st.options.weight_store, st.options.request_timeout, fetch_atom::value, req)
      .then(
          [self](const WireMsg& msg) {
            auto& st = self->state;
            st.busy = false;
            auto w = decode_or_count<WeightSetData>(self, msg, st.errors, st.options.log);
            if (w && (!st.last || w->version > *st.last)) evaluate(self, *w);
            maybe_evaluate(self);
          },
          [self](const caf::error& err) {
            auto& st = self->state;
            st.busy = false;
            st.options.log->warn("evaluator: fetching the newest weights failed: {}", caf::to_string(err));
          });
}

evaluator_actor::behavior_type evaluator_impl(Self self, EvaluatorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.model = make_seeded_transformer(transformer_options(st.options.policy, Tokenizer::vocab), 0);
  self->send(st.options.weight_store, subscribe_atom::value, caf::actor_cast<weights_listener>(self));
  return {
      [self](weights_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto note = decode_or_count<WeightsAvailableData>(self, msg, st.errors, st.options.log);
        if (!note) return;
        st.newest_known = std::max(st.newest_known, note->version);
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
