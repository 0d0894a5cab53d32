// The code task family (envs/code): small Python functions to write from a
// specification with visible examples; hidden tests decide the reward.
// A task is rebuilt from its id ("family:seed") alone, deterministically,
// so the reward side needs no task file and the hidden tests never travel
// with the task: an env shows the spec and examples, the policy answers
// with a program, and a CodeScorer (envs/code/code_scorer.hpp) rebuilds
// the hidden tests from the id and runs the program against them in the
// sandbox. CAF-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "envs/code/program_tests.hpp"

namespace rlx {

struct CodeTask {
  std::string id;                       // "family:seed": all it takes to rebuild the task
  std::string function = "solve";       // the function the program must define
  std::string spec;                     // what it must do, with its signature
  std::vector<ProgramTest> examples;    // shown to the policy
  std::vector<ProgramTest> hidden;      // decide the reward; never shown
  std::string reference;                // a correct program (supervised data, tests)
};

// The families, e.g. "add_k", "sum_list".
const std::vector<std::string>& code_task_families();

// Task `seed` of `family`. Errc::config_unknown_name for an unknown family.
Result<CodeTask> make_code_task(std::string_view family, std::uint64_t seed);

// The task an id names; Errc::invalid_field for an id that is not "family:seed".
Result<CodeTask> code_task(std::string_view id);

}  // namespace rlx
