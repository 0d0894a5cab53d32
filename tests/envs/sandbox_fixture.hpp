// The sandbox the env tests run programs in: bubblewrap with the default
// limits and `wall_s` of wall clock (tools/install-deps.sh installs it).
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "envs/code/sandbox.hpp"

namespace rlx::test {

inline Sandbox open_sandbox(double wall_s = 5.0) {
  SandboxOptions o;
  o.limits.wall_s = wall_s;
  auto s = Sandbox::open(o);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace rlx::test
