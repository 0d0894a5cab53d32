// The external-env protocol's replies (docs/external-envs.md,
// messages/extenv.capnp), in JSON lines or in Cap'n Proto stream framing.
// They come from another process, whatever it is: every kind, size and
// number is checked, and garbage is an Errc::env_failed error that says
// what was wrong ("garbage: ...", "wrong sizes: ...", "the env reported:
// ..."), never a crash. Fuzzed (fuzz/decode_fuzz.cpp: ext_env_json,
// ext_env_capnp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/choices.hpp"
#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

struct ExtEnvSpec {
  std::string name;
  std::uint32_t obs_dim = 0, num_actions = 0, max_episode_steps = 0;
};

// A reply to `spec`: obsDim and numActions positive, obsDim at most 2^20.
Result<ExtEnvSpec> parse_ext_env_spec(EnvProtocol protocol, std::span<const unsigned char> reply);

// A reply to `reset` or `step` of `num_envs` environments of `obs_dim`
// floats each: one observation, reward and end flag per env, finite
// numbers, hints and payloads for every env or none. `hints`, when given,
// receives the env's hints. A Cap'n Proto reply is the message's words
// (its stream framing already read).
Result<EnvStepResultData> parse_ext_env_result(EnvProtocol protocol, std::span<const unsigned char> reply,
                                               std::size_t num_envs, std::size_t obs_dim,
                                               std::vector<std::string>* hints = nullptr);

}  // namespace rlx
