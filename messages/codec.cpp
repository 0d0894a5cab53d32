// Framing checks and error classification shared by every decoder.
#include "messages/codec_detail.hpp"

namespace rlx {

const char* to_string(MessageKind k) {
  static const char* names[] = {"segment", "weight_set", "weight_chunk", "weights_available", "weight_request",
                                "env_reset", "env_step", "env_step_result", "env_spec", "reward_request",
                                "reward_result", "join", "leave", "heartbeat", "metrics", "scale", "record",
                                "unknown"};
  auto i = static_cast<std::size_t>(k);
  return i < std::size(names) ? names[i] : "unknown";
}

namespace codec_detail {

MessageKind kind_of(Which w) {
  auto i = static_cast<std::uint16_t>(w);
  return i < static_cast<std::uint16_t>(MessageKind::unknown) ? static_cast<MessageKind>(i) : MessageKind::unknown;
}

Error classify(const kj::Exception& e) {
  std::string what = e.getDescription().cStr();
  if (what.find("nested") != std::string::npos) return make_error(Errc::message_too_deep, what);
  if (what.find("traversal limit") != std::string::npos) return make_error(Errc::message_too_large, what);
  if (what.find("out-of-bounds") != std::string::npos || what.find("truncated") != std::string::npos ||
      what.find("too small") != std::string::npos)
    return make_error(Errc::truncated_message, what);
  return make_error(Errc::malformed_message, what);
}

Result<wire::Envelope::Reader> open_checked(const WireBuffer& buf, const DecodeOptions& options,
                                            std::unique_ptr<capnp::FlatArrayMessageReader>& reader) {
  auto env = open_root<wire::Envelope>(buf, options, reader);
  if (!env) return env;
  if (env->getSchemaVersion() > wire::ENVELOPE_SCHEMA_VERSION)
    return make_error(Errc::unsupported_schema, "schema version " + std::to_string(env->getSchemaVersion()) +
                                                    " > " + std::to_string(wire::ENVELOPE_SCHEMA_VERSION));
  return env;
}

}  // namespace codec_detail

Result<MessageKind> peek_kind(const WireBuffer& buf, const DecodeOptions& options) {
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;
  try {
    auto env = codec_detail::open_checked(buf, options, reader);
    if (!env) return env.error();
    return codec_detail::kind_of(env->getBody().which());
  } catch (const kj::Exception& e) {
    return codec_detail::classify(e);
  }
}

}  // namespace rlx
