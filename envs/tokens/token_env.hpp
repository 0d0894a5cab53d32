// What a token run ("tokens:KIND") has in place of environments: the
// spec (no observation vector; one action per token of the vocabulary).
// Token tasks are drawn and decoded by the explorer itself
// (explorers/token_rollout.hpp); this env cannot be stepped, and saying
// so is its whole behaviour. It exists so that everything that asks a
// run for its env spec gets one.
#pragma once

#include <memory>
#include <string>

#include "envs/batch_env.hpp"

namespace rlx {

// The kind of a token env name ("tokens:code" -> "code"); empty if it is not one.
std::string token_env_kind(const std::string& env);

std::unique_ptr<BatchEnv> make_token_spec_env(const std::string& env);

}  // namespace rlx
