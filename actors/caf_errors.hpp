// rlx::Errc as a CAF error category ("rlx"): an Error a handler returns
// crosses actors and nodes as itself, code and message, so the receiver
// reads a store's not_found as Errc::not_found instead of interpreting a
// runtime_error's text. CAF's own errors (a request that timed out, a dead
// peer) become the nearest Errc on the way back.
#pragma once

#include <string>
#include <string_view>

#include <caf/all.hpp>

#include "core/error.hpp"

namespace rlx {

constexpr caf::atom_value kErrcCategory = caf::atom("rlx");

inline caf::error to_caf(const Error& e) {
  return caf::error(static_cast<std::uint8_t>(e.code), kErrcCategory, caf::make_message(e.message));
}

inline Error from_caf(const caf::error& e) {
  if (e.category() == kErrcCategory) {
    std::string message;
    if (e.context().match_elements<std::string>()) message = e.context().get_as<std::string>(0);
    auto code = static_cast<Errc>(e.code());
    if (std::string_view(to_string(code)) == "unknown") code = Errc::io;  // a newer peer's code
    return Error{code, std::move(message)};
  }
  if (e == caf::sec::request_timeout) return Error{Errc::timeout, "no answer in time"};
  return Error{Errc::io, caf::to_string(e)};
}

// "rlx.not_found: version 7 is not held" in CAF's own renderings.
inline void register_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(kErrcCategory, [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
    std::string out = std::string("rlx.") + to_string(static_cast<Errc>(code));
    if (ctx.match_elements<std::string>()) out += ": " + ctx.get_as<std::string>(0);
    return out;
  });
}

}  // namespace rlx
