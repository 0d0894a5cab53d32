#include "actors/learner_actor.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "actors/guard.hpp"
#include "core/clock.hpp"
#include "learner/checkpoint.hpp"
#include "learner/segment_arrivals.hpp"

namespace rlx {

struct LearnerState {
  LearnerActorOptions options;
  std::shared_ptr<LearnerCore> core;
  UpdateStats last;
  std::uint64_t stale_tokens = 0;                          // token policy, over the run (this process)
  std::uint64_t hinted_rows = 0;                           // token policy, over the run (this process)
  std::uint64_t skipped_rows = 0;                          // token policy, over the run (this process)
  Admission::Window window;
  ErrorCounts errors;
  std::chrono::steady_clock::time_point last_report;
  double busy_s = 0;                                       // time spent on segments and updates (finished)
  std::chrono::steady_clock::time_point handling_since;    // when the segment in hand began
  bool handling = false;                                   // inside the segment handler
  std::map<caf::actor_addr, std::uint32_t> sender_ids;    // whose segments those were: an undecodable one
                                                          // from a known sender still counts for it
  SegmentArrivals arrivals;                               // what the explorers' segment numbers show
  std::uint64_t messages = 0;                             // segment messages that reached this actor
  std::uint64_t checkpointed = 0;                         // the version this process last checkpointed (0: none)

  MetricsData metrics() {
    const auto& adm = core->admission();
    const auto& stats = core->stats();
    MetricsData m;
    m.env_steps = stats.env_steps();
    m.episodes = stats.episodes();
    m.episodes_lost = stats.episodes_lost();
    m.reward_retries = stats.reward_retries();
    m.rows_masked = stats.rows_masked();
    m.infra_failures = stats.infra_failures();
    m.decode_s = stats.work().decode_s;
    m.tool_s = stats.work().tool_s;
    m.score_s = stats.work().score_s;
    m.tool_calls = stats.work().tool_calls;
    m.policy_tokens = stats.policy_tokens();
    m.mean_return = static_cast<float>(stats.mean_return());
    m.policy_version = core->trainer().version();
    m.segments_received = core->received();
    m.segments_trained = adm.accepted();
    m.segments_update_failed = core->update_failed();
    m.segments_dropped_stale = adm.dropped_stale();
    m.segments_rejected = adm.rejected();
    m.lag_mean = static_cast<float>(window.mean);
    m.lag_max = window.max;
    m.lag_histogram = adm.lag_histogram();
    m.ratio_mean = static_cast<float>(last.correction.ratio_mean);
    m.ratio_max = static_cast<float>(last.correction.ratio_max);
    m.truncated_fraction = static_cast<float>(last.correction.truncated_fraction);
    m.policy_loss = static_cast<float>(last.policy_loss);
    m.value_loss = static_cast<float>(last.value_loss);
    m.entropy = static_cast<float>(last.entropy);
    m.load_balance_loss = static_cast<float>(last.load_balance);
    m.expert_utilisation = last.expert_utilisation;
    m.route_mismatch = static_cast<float>(last.route_mismatch);
    m.stale_tokens = stale_tokens;
    m.hint_kl = static_cast<float>(last.hint_kl);
    m.reference_kl = static_cast<float>(last.reference_kl);
    m.sampler_mismatch = static_cast<float>(last.sampler_mismatch);
    m.hinted_rows = hinted_rows;
    m.skipped_rows = skipped_rows;
    m.updates = core->updates();
    m.segments_by_explorer.assign(core->by_explorer().begin(), core->by_explorer().end());
    for (const auto& [id, a] : arrivals.all()) m.arrivals_by_explorer.push_back({id, a.accounted, a.vanished});
    // Reports go out from inside the segment handler: its time so far counts.
    m.busy_s = busy_s;
    if (handling) m.busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - handling_since).count();
    return m;
  }
};

namespace {

using Self = learner_actor::stateful_pointer<LearnerState>;

// Publishes the current weights; false when the set is larger than the
// store takes or holds a tensor whose rows are larger than a set carries (the learner
// then stops, and the run with it: waiting for a version no explorer can
// get would stall the run at its start).
bool publish(Self self) {
  auto& st = self->state;
  // Encoded straight from the parameters into recycled memory, hashed once.
  EncodedWeightSet w;
  try {
    w = st.core->encoded_weights(unix_now_ns());
  } catch (const std::length_error& e) {  // a tensor whose rows are larger than a weight set carries
    const auto why = fmt::format("v{} cannot be published: {}", st.core->trainer().version(), e.what());
    st.options.log->error("{}", why);
    self->quit(caf::make_error(caf::sec::runtime_error, why));
    return false;
  }
  if (st.options.max_set_bytes > 0 && w.buf.size() > st.options.max_set_bytes) {
    const auto why = fmt::format(
        "the weight set of v{} is {:.1f} MiB ({} parameters), more than the {:.1f} MiB a node takes: raise "
        "[weight_store] max_set_mb (0: the machine's memory) or train a smaller policy",
        st.core->trainer().version(), static_cast<double>(w.buf.size()) / (1 << 20), w.parameters,
        static_cast<double>(st.options.max_set_bytes) / (1 << 20));
    st.options.log->error("{}", why);
    self->quit(caf::make_error(caf::sec::runtime_error, why));
    return false;
  }
  if (st.options.recorder)
    self->send(st.options.recorder, version_atom::value, st.core->trainer().version(), w.checksum, st.core->updates(),
               w.parameters);
  self->send(st.options.weight_store, publish_atom::value, WireMsg{std::move(w.buf)});
  return true;
}

bool checkpoint(Self self) {
  auto& st = self->state;
  auto saved = save_checkpoint(*st.core, st.options.checkpoint_dir, st.options.checkpoint_keep);
  if (!saved) {
    st.options.log->error("checkpoint not written: {}", saved.error().message);
    return false;
  }
  st.checkpointed = st.core->trainer().version();
  return true;
}

// The run ends: the last update is checkpointed too, so a run stopped
// between two `checkpoint_every` marks leaves its end weights for
// `--init` and `--resume`. A batch that did not fill cannot be: a
// checkpoint holds none (learner/checkpoint.hpp); the log holds its segments.
void final_checkpoint(Self self) {
  auto& st = self->state;
  const auto version = st.core->trainer().version();
  if (!st.options.checkpoint_every || st.core->updates() == 0 || st.checkpointed == version) return;
  if (st.core->batch_size() > 0) {
    st.options.log->info("end weights v{} not checkpointed: {} segments wait in a batch that did not fill (the rollout "
                         "log holds them; --resume replays them after the newest checkpoint)",
                         version, st.core->batch_size());
    return;
  }
  if (checkpoint(self)) st.options.log->info("end weights v{} checkpointed", version);
}

void report(Self self, bool force) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  if (!st.options.coordinator || (!force && now - st.last_report < std::chrono::milliseconds(100))) return;
  st.last_report = now;
  auto w = st.core->admission().take_window();
  if (w.max > 0 || w.mean > 0 || force) st.window = w;
  self->send(st.options.coordinator, metrics_atom::value, WireMsg{encode(st.metrics(), "learner")});
}

void record(Self self, const WireMsg& msg, const Arrival& a) {
  auto& st = self->state;
  if (!st.options.recorder) return;
  self->send(st.options.recorder, record_atom::value,
             RecordEntry{msg, RolloutRecordData{a.verdict, a.version, a.index, a.lag, a.reason}});
}

void train(Self self) {
  auto& st = self->state;
  const auto n = st.core->batch_size();
  const auto version = st.core->trainer().version();
  auto r = st.core->train();
  // The batch's records went out as trained when they arrived: the log
  // takes that back (their count moved to update_failed in the core).
  if (!r && st.options.recorder)
    self->send(st.options.recorder, failed_atom::value, version, static_cast<std::uint32_t>(n), r.error().message);
  if (!r && r.error().code == Errc::group_broken) {
    // The data-parallel group broke (a rank died): training cannot go on.
    st.options.log->error("{}", r.error().message);
    self->quit(caf::make_error(caf::sec::runtime_error, r.error().message));
    return;
  }
  if (!r) {
    // A broken batch must not kill the learner: count it, log it, drop it.
    st.errors.add(r.error().code);
    st.options.log->error("the update failed; its batch of {} segments is not trained: {}", n, r.error().message);
    report(self, true);
    return;
  }
  st.last = std::move(r).value();
  st.stale_tokens += st.last.stale_tokens;
  st.hinted_rows += st.last.hinted_rows;
  st.skipped_rows += st.last.skipped_rows;
  if (st.core->publish_due()) publish(self);
  if (st.options.checkpoint_every && st.core->updates() % st.options.checkpoint_every == 0) checkpoint(self);
  st.options.log->debug("update {} -> v{}: pi {:.4f} v {:.4f} H {:.3f} ratio {:.3f}", st.core->updates(),
                        st.core->trainer().version(), st.last.policy_loss, st.last.value_loss, st.last.entropy,
                        st.last.correction.ratio_mean);
  report(self, true);
}

}  // namespace

learner_actor::behavior_type learner_impl(Self self, LearnerActorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  const bool resumed = st.options.resumed != nullptr;
  st.core = st.options.resumed ? std::move(st.options.resumed) : std::make_shared<LearnerCore>(st.options.core);
  // Explorers start from the learner's current weights: version 0, or the
  // version a resumed run reached.
  publish(self);
  // The status shows where a resumed run stands before its first segment.
  if (resumed) report(self, true);
  return {
      [self](segment_atom, const WireMsg& msg) {
        auto& st = self->state;
        if (st.options.drop_for_test.count(++st.messages)) return;  // injected: lost in transit, unseen
        st.handling_since = std::chrono::steady_clock::now();
        st.handling = true;
        // The credit goes back whatever the verdict: the segment was consumed.
        if (auto sender = self->current_sender())
          self->send(caf::actor_cast<explorer_actor>(sender), ack_atom::value);
        auto seg = decode_or_count<Segment>(self, msg, st.errors, st.options.log);
        const caf::actor_addr from = self->current_sender() ? self->current_sender()->address() : caf::actor_addr{};
        if (seg) st.sender_ids[from] = seg->explorer_id;
        const auto id = st.sender_ids.find(from);
        st.core->count_from(id != st.sender_ids.end() ? id->second : LearnerCore::kUnattributed);
        if (seg) {
          if (const auto gap = st.arrivals.arrived(seg->explorer_id, seg->sent_index, seg->sent_base); gap.count())
            st.options.log->warn("explorer/{} sent segments {}..{} that never arrived ({} vanished in all)",
                                 seg->explorer_id, gap.first, gap.last, st.arrivals.vanished());
        } else if (id != st.sender_ids.end()) {
          st.arrivals.unreadable(id->second);
        }
        std::string why = seg ? "" : "malformed";
        const bool decoded = seg.has_value();
        const Arrival a = st.core->admit(std::move(seg), why);
        if (decoded && a.verdict == Verdict::rejected) st.errors.add(Errc::invalid_field);  // Trainer::refuses
        if (a.verdict == Verdict::dropped_stale)
          st.options.log->debug("dropped segment {}: lag {} > {}", a.index, a.lag, st.options.core.max_staleness);
        record(self, msg, a);
        const bool full = st.core->batch_full();
        if (full) train(self);
        if (!full) report(self, false);
        st.busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - st.handling_since).count();
        st.handling = false;
      },
      [self](metrics_atom) {
        auto& st = self->state;
        return WireMsg{encode(st.metrics(), "learner")};
      },
      [self](stop_atom) {
        final_checkpoint(self);
        return WireMsg{encode(self->state.metrics(), "learner")};
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

learner_actor spawn_learner(caf::actor_system& system, LearnerActorOptions options) {
  return system.spawn(learner_impl, std::move(options));
}

}  // namespace rlx
