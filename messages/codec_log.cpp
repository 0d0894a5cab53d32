// The rollout log's entries (messages/log.capnp).
#include <capnp/any.h>
#include <fmt/format.h>
#include <xxhash.h>

#include "messages/codec_detail.hpp"
#include "messages/log.capnp.h"
#include "messages/log_codec.hpp"

namespace rlx {
using namespace codec_detail;

const char* to_string(LogKind k) {
  switch (k) {
    case LogKind::start: return "start";
    case LogKind::rollout: return "rollout";
    case LogKind::weights: return "weights";
    case LogKind::failed_update: return "failed update";
  }
  return "unknown";
}

namespace {

std::uint64_t body_checksum(wire::LogBody::Reader body) {
  auto canonical = capnp::canonicalize(body);
  auto bytes = canonical.asBytes();
  return XXH64(bytes.begin(), bytes.size(), 0);
}

template <class Fill>
EncodedEntry build_entry(std::uint64_t seq, Fill&& fill, std::size_t size_hint_words = 0) {
  capnp::MallocMessageBuilder message(
      static_cast<unsigned>(std::max<std::size_t>(size_hint_words, capnp::SUGGESTED_FIRST_SEGMENT_WORDS)));
  auto entry = message.initRoot<wire::LogEntry>();
  entry.setSeq(seq);
  fill(entry.initBody());
  EncodedEntry out;
  out.checksum = body_checksum(entry.getBody().asReader());
  entry.setChecksum(out.checksum);
  out.buf = WireBuffer(capnp::messageToFlatArray(message));
  return out;
}

}  // namespace

EncodedEntry encode_log_start(std::uint64_t seq, const RunStartData& x) {
  return build_entry(seq, [&](wire::LogBody::Builder b) {
    auto s = b.initStart();
    s.setSchemaVersion(wire::LOG_SCHEMA_VERSION);
    s.setUnixNs(x.unix_ns);
    s.setResumed(x.resumed);
    s.setConfig(kj::StringPtr(x.config.c_str()));
    s.setSource(kj::StringPtr(x.source.c_str()));
  });
}

EncodedEntry encode_log_rollout(std::uint64_t seq, const RolloutRecordData& x, const WireBuffer& segment_envelope) {
  return build_entry(
      seq,
      [&](wire::LogBody::Builder b) {
        auto r = b.initRollout();
        r.setVerdict(static_cast<wire::Verdict>(x.verdict));
        r.setLearnerVersion(x.learner_version);
        r.setAdmissionIndex(x.admission_index);
        r.setLag(x.lag);
        r.setReason(kj::StringPtr(x.reason.c_str()));
        if (x.verdict != Verdict::rejected) {
          capnp::ReaderOptions ro;
          capnp::FlatArrayMessageReader reader(segment_envelope.words(), ro);
          r.setSegment(reader.getRoot<wire::Envelope>().getBody().getSegment());
        }
      },
      segment_envelope.size() / 8 + 64);
}

EncodedEntry encode_log_weights(std::uint64_t seq, const WeightVersionData& x) {
  return build_entry(seq, [&](wire::LogBody::Builder b) {
    auto w = b.initWeights();
    w.setVersion(x.version);
    w.setChecksum(x.checksum);
    w.setUpdates(x.updates);
    w.setPublishedUnixNs(x.published_unix_ns);
    w.setNumParameters(x.num_parameters);
  });
}

EncodedEntry encode_log_failed_update(std::uint64_t seq, const FailedUpdateData& x) {
  return build_entry(seq, [&](wire::LogBody::Builder b) {
    auto f = b.initFailedUpdate();
    f.setLearnerVersion(x.learner_version);
    f.setSegments(x.segments);
    f.setReason(kj::StringPtr(x.reason.c_str()));
  });
}

WireBuffer encode_index_entry(const IndexEntryData& x) {
  capnp::MallocMessageBuilder message(16);
  auto e = message.initRoot<wire::IndexEntry>();
  e.setSeq(x.seq);
  e.setOffset(x.offset);
  e.setBytes(x.bytes);
  e.setChecksum(x.checksum);
  e.setKind(static_cast<std::uint8_t>(x.kind));
  return WireBuffer(capnp::messageToFlatArray(message));
}

Result<LogEntryData> decode_log_entry(const WireBuffer& buf, bool with_segment, const DecodeOptions& options) {
  if (with_segment && buf.is_borrowed()) return decode_log_entry(buf.owned(), with_segment, options);  // views
  std::optional<capnp::FlatArrayMessageReader> reader;
  try {
    auto entry = open_root<wire::LogEntry>(buf, options, reader);
    if (!entry) return entry.error();
    LogEntryData out;
    out.seq = entry->getSeq();
    out.checksum = entry->getChecksum();
    auto body = entry->getBody();
    const std::uint64_t actual = body_checksum(body);
    if (actual != out.checksum)
      return make_error(Errc::corrupt_record, fmt::format("checksum {:016x} != stored {:016x} (seq field {})", actual,
                                                          out.checksum, out.seq));
    switch (body.which()) {
      case wire::LogBody::START: {
        auto s = body.getStart();
        if (s.getSchemaVersion() > wire::LOG_SCHEMA_VERSION)
          return make_error(Errc::unsupported_schema, "log schema version " + std::to_string(s.getSchemaVersion()));
        out.kind = LogKind::start;
        out.start = RunStartData{s.getUnixNs(), s.getResumed(), s.getConfig().cStr(), s.getSource().cStr()};
        break;
      }
      case wire::LogBody::ROLLOUT: {
        auto r = body.getRollout();
        out.kind = LogKind::rollout;
        auto& rec = out.rollout.record;
        rec.verdict = static_cast<Verdict>(r.getVerdict());
        if (static_cast<unsigned>(rec.verdict) > 2) invalid("rollout: unknown verdict");
        rec.learner_version = r.getLearnerVersion();
        rec.admission_index = r.getAdmissionIndex();
        rec.lag = r.getLag();
        rec.reason = r.getReason().cStr();
        if (rec.verdict != Verdict::rejected && !r.hasSegment()) invalid("rollout: a kept segment is missing");
        if (with_segment && r.hasSegment()) out.rollout.segment = read_segment(r.getSegment(), buf.keepalive());
        break;
      }
      case wire::LogBody::WEIGHTS: {
        auto w = body.getWeights();
        out.kind = LogKind::weights;
        out.weights = WeightVersionData{w.getVersion(), w.getChecksum(), w.getUpdates(), w.getPublishedUnixNs(),
                                        w.getNumParameters()};
        break;
      }
      case wire::LogBody::FAILED_UPDATE: {
        auto f = body.getFailedUpdate();
        out.kind = LogKind::failed_update;
        out.failed_update = FailedUpdateData{f.getLearnerVersion(), f.getSegments(), f.getReason().cStr()};
        break;
      }
      default:
        return make_error(Errc::unsupported_schema, "unknown log entry kind");
    }
    return out;
  } catch (const Invalid& e) {
    return e.error;
  } catch (const kj::Exception& e) {
    return classify(e);
  }
}

Result<IndexEntryData> decode_index_entry(const WireBuffer& buf, const DecodeOptions& options) {
  std::optional<capnp::FlatArrayMessageReader> reader;
  try {
    auto e = open_root<wire::IndexEntry>(buf, options, reader);
    if (!e) return e.error();
    if (e->getKind() > static_cast<std::uint8_t>(LogKind::failed_update))
      return make_error(Errc::invalid_field, "index: unknown kind");
    return IndexEntryData{e->getSeq(), e->getOffset(), e->getBytes(), e->getChecksum(),
                          static_cast<LogKind>(e->getKind())};
  } catch (const kj::Exception& e) {
    return classify(e);
  }
}

}  // namespace rlx
