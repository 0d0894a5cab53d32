// `rlx serve-env NAME`: serves a built-in environment over the external
// environment protocol on stdin/stdout (docs/external-envs.md). A
// reference implementation of the protocol's env side, used to test the
// Cap'n Proto framing and to measure the protocol's own overhead.
#pragma once

#include <string>

#include "core/choices.hpp"
#include "envs/env.hpp"

namespace rlx {
// Serves until `close` or end of input; returns the exit code.
int serve_env(const std::string& name, EnvProtocol protocol, const EnvRegistry& registry);
}  // namespace rlx
