// The TOML of a small token-policy run on one head node: `extra` goes
// into [policy] (and may open more sections, such as [tokens]); the
// caller appends the head's explorers, envs_per_explorer and rewards.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "tests/helpers.hpp"

namespace rlx::test {

inline std::string token_toml(const std::string& env, const std::string& dir, const std::string& extra) {
  return R"(
[run]
name = "tokens-test"
seed = 5
env = ")" + env + R"("
max_staleness = 4
log_dir = ")" + dir + R"("
report_interval_s = 0.2
stop = { mean_return = 2.0, max_env_steps = 2000, max_seconds = 0.0 }
[policy]
kind = "moe_transformer"
d_model = 32
layers = 1
heads = 2
experts = 4
top_k = 2
expert_hidden = 32
)" + extra + R"(
[learner]
algorithm = "grpo"
batch_segments = 1
lr = 1e-3
[[node]]
name = "head"
host = "127.0.0.1"
port = 0
actors = ["coordinator", "learner", "weight_store", "recorder"]
)";
}

// A small token run's configuration, logging into `dir`: `extra` into
// [policy] as for token_toml, then `head`'s explorers, envs_per_explorer
// and rewards.
inline ClusterConfig token_config(const std::string& env, const std::filesystem::path& dir, const std::string& extra,
                                  const std::string& head) {
  auto cfg = parse(token_toml(env, dir.string(), extra) + head);
  INFO((cfg ? "" : cfg.error().message));
  REQUIRE(cfg.ok());
  return *cfg;
}

}  // namespace rlx::test
