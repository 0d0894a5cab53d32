// The one CAF message type that carries every RLX wire message: a
// WireBuffer (an Envelope's bytes). Registered by name, serialisable, so
// it crosses nodes; inside a process CAF copies only the shared pointer.
// Only actors/ and tools/ include this header.
#pragma once

#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/wire_buffer.hpp"

namespace rlx {

struct WireMsg {
  WireBuffer buf;
};

// Serialises the bytes as one byte sequence. Loading copies them into a
// fresh aligned buffer (the only copy on the receiving side).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireMsg& x) {
  if constexpr (Inspector::writes_state) {
    auto tmp = std::make_shared<std::vector<char>>();
    return f(caf::meta::type_name("rlx.wire"), *tmp, caf::meta::load_callback([&x, tmp]() -> caf::error {
               x.buf = WireBuffer::copy_of(tmp->data(), tmp->size());
               return caf::none;
             }));
  } else {
    auto bytes = x.buf.bytes();
    std::vector<char> tmp(reinterpret_cast<const char*>(bytes.data()),
                          reinterpret_cast<const char*>(bytes.data()) + bytes.size());
    return f(caf::meta::type_name("rlx.wire"), tmp);
  }
}

// Registers WireMsg (as "rlx.wire") with an actor system config.
inline void register_wire_types(caf::actor_system_config& cfg) { cfg.add_message_type<WireMsg>("rlx.wire"); }

}  // namespace rlx
