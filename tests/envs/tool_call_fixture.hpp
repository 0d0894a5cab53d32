// A workspace tool call as the tests write it: `text` must parse as one
// complete call (agent_tools.hpp), which is returned.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "envs/workspace/agent_tools.hpp"

namespace rlx::test {

inline ToolCall parsed_call(const std::string& text) {
  const ParsedTurn t = parse_turn(text, false);
  INFO(text << " -> " << t.error);
  REQUIRE(t.state == ParsedTurn::State::call);
  return t.call;
}

}  // namespace rlx::test
