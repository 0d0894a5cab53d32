#include "actors/recorder.hpp"

#include "core/clock.hpp"

#include <chrono>

#include <kj/exception.h>

namespace rlx {

struct RecorderState {
  RecorderOptions options;
  bool closed = false;          // flushed at the run's end
  bool said_late = false;
  std::uint64_t unrecorded = 0;  // records (segments and versions) not written

  // After the final flush (an explorer that did not drain in time still
  // sends): not written, said once, not an error of the log.
  bool late() {
    if (!closed) return false;
    if (!std::exchange(said_late, true))
      options.log->warn("rollout log: a record arrived after the run's final flush; not written");
    return true;
  }

  // A write's outcome: a failed one (the writer takes no more after its
  // first failure) is counted and reported; the first is logged.
  void check(recorder_actor::stateful_pointer<RecorderState> self, const Result<void>& r) {
    if (r) return;
    const auto& failure = options.writer->failure();
    const std::string why = failure ? failure->message : r.error().message;
    if (unrecorded++ == 0)
      options.log->error("rollout log: {}; nothing more is written after {} entries", why,
                         options.writer->entries_written());
    if (options.coordinator) self->send(options.coordinator, unrecorded_atom::value, unrecorded, why);
  }
};

recorder_actor::behavior_type recorder_impl(recorder_actor::stateful_pointer<RecorderState> self,
                                            RecorderOptions options) {
  self->state.options = std::move(options);
  return {
      [self](record_atom, const RecordEntry& entry) {
        auto& st = self->state;
        if (st.late() || entry.arrival.verdict > Verdict::rejected) return;  // a value no Verdict has
        const auto index = entry.arrival.admission_index;
        try {
          st.check(self, st.options.writer->write_rollout(entry.arrival, entry.segment.buf));
        } catch (const kj::Exception& e) {
          // Only segments the learner already validated are copied, so
          // this is a bug; keep recording the rest.
          st.options.log->error("record {} not written: {}", index, e.getDescription().cStr());
        }
      },
      [self](version_atom, std::uint64_t version, std::uint64_t checksum, std::uint64_t updates,
             std::uint64_t params) {
        auto& st = self->state;
        if (st.late()) return;
        st.check(self, st.options.writer->write_weights(
            WeightVersionData{version, checksum, updates, unix_now_ns(), params}));
      },
      [self](failed_atom, std::uint64_t version, std::uint32_t segments, const std::string& reason) {
        auto& st = self->state;
        if (st.late()) return;
        st.check(self, st.options.writer->write_failed_update(FailedUpdateData{version, segments, reason}));
      },
      [self](flush_atom) {
        auto& st = self->state;
        if (!st.closed)
          if (auto closed = st.options.writer->close(); !closed)
            st.options.log->error("rollout log: {}", closed.error().message);
        st.closed = true;
        return st.options.writer->entries_written();
      },
  };
}

recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options) {
  return system.spawn(recorder_impl, std::move(options));
}

}  // namespace rlx
