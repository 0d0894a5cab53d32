#include "actors/recorder.hpp"

#include "core/clock.hpp"

#include <chrono>

#include <kj/exception.h>

namespace rlx {

struct RecorderState {
  RecorderOptions options;
  bool failed = false;
  bool closed = false;  // flushed at the run's end

  // After the final flush (an explorer that did not drain in time still
  // sends): not written, said once, not an error of the log.
  bool late() {
    if (!closed) return false;
    if (!failed) options.log->warn("rollout log: a record arrived after the run's final flush; not written");
    failed = true;
    return true;
  }

  // False (and recording off) after the first failed write.
  void check(const Result<void>& r) {
    if (r || failed) return;
    failed = true;
    options.log->error("rollout log: {}; recording is off after {} entries", r.error().message,
                       options.writer->entries_written());
  }
};

recorder_actor::behavior_type recorder_impl(recorder_actor::stateful_pointer<RecorderState> self,
                                            RecorderOptions options) {
  self->state.options = std::move(options);
  return {
      [self](record_atom, const RecordEntry& entry) {
        auto& st = self->state;
        if (st.late() || st.failed || entry.arrival.verdict > Verdict::rejected) return;  // a value no Verdict has
        const auto index = entry.arrival.admission_index;
        try {
          st.check(st.options.writer->write_rollout(entry.arrival, entry.segment.buf));
        } catch (const kj::Exception& e) {
          // Only segments the learner already validated are copied, so
          // this is a bug; keep recording the rest.
          st.options.log->error("record {} not written: {}", index, e.getDescription().cStr());
        }
      },
      [self](version_atom, std::uint64_t version, std::uint64_t checksum, std::uint64_t updates,
             std::uint64_t params) {
        auto& st = self->state;
        if (st.late() || st.failed) return;
        st.check(st.options.writer->write_weights(
            WeightVersionData{version, checksum, updates, unix_now_ns(), params}));
      },
      [self](flush_atom) {
        auto& st = self->state;
        if (!st.closed) st.check(st.options.writer->close());
        st.closed = true;
        return st.options.writer->entries_written();
      },
  };
}

recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options) {
  return system.spawn(recorder_impl, std::move(options));
}

}  // namespace rlx
