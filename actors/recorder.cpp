#include "actors/recorder.hpp"

#include <cstdio>

#include <kj/exception.h>

#include "messages/codec.hpp"

namespace rlx {

struct RecorderState {
  RecorderOptions options;
  std::FILE* file = nullptr;
  std::uint64_t written = 0;
  std::uint64_t bytes = 0;
  ~RecorderState() {
    if (file) std::fclose(file);
  }
};

recorder_actor::behavior_type recorder_impl(recorder_actor::stateful_pointer<RecorderState> self,
                                            RecorderOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  std::error_code ec;
  std::filesystem::create_directories(st.options.dir, ec);
  auto path = st.options.dir / "rollouts-000000.capnp";
  st.file = std::fopen(path.c_str(), "wb");
  if (!st.file) {
    st.options.log->error("cannot open {}: recording is off", path.string());
  } else {
    st.options.log->info("recording rollouts to {}", path.string());
  }
  return {
      [self](record_atom, const WireMsg& segment, std::uint8_t verdict, std::uint64_t version, std::uint64_t index,
             std::uint64_t lag, const std::string& reason) {
        auto& st = self->state;
        if (!st.file || verdict > 2) return;
        RolloutRecordData r{static_cast<Verdict>(verdict), version, index, lag, reason};
        WireBuffer rec;
        try {
          rec = encode_record(r, segment.buf, "recorder");
        } catch (const kj::Exception& e) {
          // Only a segment that the learner already validated is copied, so
          // this is a bug; keep recording the rest.
          st.options.log->error("record {} not written: {}", index, e.getDescription().cStr());
          return;
        }
        auto bytes = rec.bytes();
        if (std::fwrite(bytes.data(), 1, bytes.size(), st.file) != bytes.size()) {
          st.options.log->error("write failed after {} records; recording is off", st.written);
          std::fclose(st.file);
          st.file = nullptr;
          return;
        }
        ++st.written;
        st.bytes += bytes.size();
      },
      [self](flush_atom) {
        auto& st = self->state;
        if (st.file) std::fflush(st.file);
        return st.written;
      },
  };
}

recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options) {
  return system.spawn(recorder_impl, std::move(options));
}

}  // namespace rlx
