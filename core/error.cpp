#include "core/error.hpp"

namespace rlx {

const char* to_string(Errc code) {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::truncated_message: return "truncated_message";
    case Errc::malformed_message: return "malformed_message";
    case Errc::message_too_large: return "message_too_large";
    case Errc::message_too_deep: return "message_too_deep";
    case Errc::wrong_message_type: return "wrong_message_type";
    case Errc::unsupported_schema: return "unsupported_schema";
    case Errc::invalid_field: return "invalid_field";
    case Errc::corrupt_record: return "corrupt_record";
    case Errc::config_parse: return "config_parse";
    case Errc::config_type: return "config_type";
    case Errc::config_unknown_key: return "config_unknown_key";
    case Errc::config_range: return "config_range";
    case Errc::config_unknown_name: return "config_unknown_name";
    case Errc::config_missing: return "config_missing";
    case Errc::stale_segment: return "stale_segment";
    case Errc::timeout: return "timeout";
    case Errc::not_found: return "not_found";
    case Errc::io: return "io";
    case Errc::group_broken: return "group_broken";
    case Errc::refused: return "refused";
    case Errc::env_failed: return "env_failed";
    case Errc::busy: return "busy";
  }
  return "unknown";
}

}  // namespace rlx
