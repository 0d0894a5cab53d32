#include "actors/learner_actor.hpp"

#include <chrono>
#include <cmath>

#include "actors/guard.hpp"
#include "learner/admission.hpp"
#include "learner/run_stats.hpp"

namespace rlx {

struct LearnerState {
  LearnerActorOptions options;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<Admission> admission;
  RunStats stats;
  std::vector<Segment> batch;
  std::uint64_t received = 0;
  std::uint64_t updates = 0;
  UpdateStats last;
  Admission::Window window;
  ErrorCounts errors;
  std::chrono::steady_clock::time_point last_report;

  MetricsData metrics() {
    MetricsData m;
    m.env_steps = stats.env_steps();
    m.episodes = stats.episodes();
    m.episodes_lost = stats.episodes_lost();
    m.mean_return = static_cast<float>(stats.mean_return());
    m.policy_version = trainer->version();
    m.segments_received = received;
    m.segments_trained = admission->accepted();
    m.segments_dropped_stale = admission->dropped_stale();
    m.segments_rejected = admission->rejected();
    m.lag_mean = static_cast<float>(window.mean);
    m.lag_max = window.max;
    m.lag_histogram = admission->lag_histogram();
    m.ratio_mean = static_cast<float>(last.correction.ratio_mean);
    m.ratio_max = static_cast<float>(last.correction.ratio_max);
    m.truncated_fraction = static_cast<float>(last.correction.truncated_fraction);
    m.policy_loss = static_cast<float>(last.policy_loss);
    m.value_loss = static_cast<float>(last.value_loss);
    m.entropy = static_cast<float>(last.entropy);
    m.load_balance_loss = static_cast<float>(last.load_balance);
    m.expert_utilisation = last.expert_utilisation;
    m.updates = updates;
    return m;
  }
};

namespace {

using Self = learner_actor::stateful_pointer<LearnerState>;

void publish(Self self) {
  auto& st = self->state;
  WeightSetData w = st.trainer->weights();
  w.created_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  self->send(st.options.weight_store, publish_atom::value, WireMsg{encode(w, "learner")});
}

void report(Self self, bool force) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (!st.options.coordinator || (!force && now - st.last_report < std::chrono::milliseconds(100))) return;
  st.last_report = now;
  auto w = st.admission->take_window();
  if (w.max > 0 || w.mean > 0 || force) st.window = w;
  self->send(st.options.coordinator, metrics_atom::value, WireMsg{encode(st.metrics(), "learner")});
}

void record(Self self, const WireMsg& msg, Verdict v, std::uint64_t lag, const std::string& reason) {
  auto& st = self->state;
  if (!st.options.recorder) return;
  self->send(st.options.recorder, record_atom::value, msg, static_cast<std::uint8_t>(v), st.trainer->version(),
             st.received - 1, lag, reason);
}

void train(Self self) {
  auto& st = self->state;
  std::vector<const Segment*> ptrs;
  for (const auto& s : st.batch) ptrs.push_back(&s);
  auto r = st.trainer->update(ptrs);
  if (!r) {
    // A broken batch must not kill the learner: count it, log it, drop it.
    st.errors.add(r.error().code);
    st.options.log->error("batch of {} segments dropped: {}", ptrs.size(), r.error().message);
    st.batch.clear();
    return;
  }
  st.last = std::move(r).value();
  st.batch.clear();
  ++st.updates;
  if (st.updates % st.options.publish_every == 0) publish(self);
  st.options.log->debug("update {} -> v{}: pi {:.4f} v {:.4f} H {:.3f} ratio {:.3f}", st.updates, st.trainer->version(),
                        st.last.policy_loss, st.last.value_loss, st.last.entropy, st.last.correction.ratio_mean);
  report(self, true);
}

}  // namespace

learner_actor::behavior_type learner_impl(Self self, LearnerActorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  st.trainer = std::make_unique<Trainer>(st.options.trainer);
  st.admission = std::make_unique<Admission>(st.options.max_staleness);
  publish(self);  // version 0: explorers start from the learner's initial weights
  return {
      [self](segment_atom, const WireMsg& msg) {
        auto& st = self->state;
        ++st.received;
        // The credit goes back whatever the verdict: the segment was consumed.
        if (auto sender = self->current_sender())
          self->send(caf::actor_cast<explorer_actor>(sender), ack_atom::value);
        auto seg = decode_or_count<Segment>(self, msg, st.errors, st.options.log);
        if (!seg || seg->obs_dim != st.options.trainer.obs_dim) {
          if (seg) st.errors.add(Errc::invalid_field);
          st.admission->count_rejected();
          record(self, msg, Verdict::rejected, 0, seg ? "obs_dim mismatch" : "malformed");
          report(self, false);
          return;
        }
        st.stats.add(*seg);
        auto d = st.admission->admit(*seg, st.trainer->version());
        if (d.verdict == Verdict::dropped_stale) {
          st.options.log->debug("dropped segment {}/{}: lag {} > {}", seg->explorer_id, seg->sequence, d.lag,
                                st.options.max_staleness);
          record(self, msg, d.verdict, d.lag, "lag " + std::to_string(d.lag));
          report(self, false);
          return;
        }
        record(self, msg, d.verdict, d.lag, "");
        st.batch.push_back(std::move(*seg));
        if (st.batch.size() >= st.options.batch_segments) train(self);
        else report(self, false);
      },
      [self](metrics_atom) {
        auto& st = self->state;
        return WireMsg{encode(st.metrics(), "learner")};
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

learner_actor spawn_learner(caf::actor_system& system, LearnerActorOptions options) {
  return system.spawn(learner_impl, std::move(options));
}

}  // namespace rlx
