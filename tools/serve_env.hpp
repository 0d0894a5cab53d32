// `rlx serve-env NAME` and `rlx workspace-tools`: built-in environments
// for processes outside RLX. serve-env serves a built-in environment over the external
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
// `rlx workspace-tools`: a harness's workspace episodes on stdin/stdout
// (envs/workspace/tool_service.hpp) until end of input.
int workspace_tools_command(int max_turns);
}  // namespace rlx
