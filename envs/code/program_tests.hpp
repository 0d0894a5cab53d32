// Scoring a model-written Python function by hidden tests, in the sandbox
// (envs/code/sandbox.hpp). Only the tests' inputs enter the sandbox: a
// driver appended to the program calls the function on each and prints
// its answers as JSON; the expected outputs stay outside and are compared
// here. Reward = the fraction of tests passed; a program that crashes,
// times out, floods its output or breaks out of nothing scores 0, with the
// reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "envs/code/sandbox.hpp"
#include "messages/types.hpp"

namespace rlx {

struct ProgramTest {
  std::string args_json;      // the arguments, a JSON array: "[2, 3]"
  std::string expected_json;  // the answer, compact JSON as Python's json.dumps(x, separators=(",", ":")) writes it
};

struct ProgramScore {
  double reward = 0;          // passed / total
  std::size_t passed = 0, total = 0;
  std::string reason;         // "passed 3 of 4", or why nothing could be scored
  std::optional<std::size_t> first_failed;  // the first test not passed (none when all passed)
  SandboxRun run;             // what the sandbox saw
  // The sandbox's machinery failed (run.machinery_failed()): the program
  // was not judged, and `reward` means nothing.
  InfraFailure failure = InfraFailure::none;
};

// The failure of the machinery a run met (none when the program's own
// behaviour decided how it ended): docs/failures.md.
InfraFailure machinery_failure(const SandboxRun& run);

// The last non-empty line of `text`, at most 200 bytes (what a failed
// run's stderr says last, for a reason).
std::string last_line(const std::string& text);

// A test as a line of a task's prompt: "# f(*[2, 3]) == 5\n" (the visible
// example, or a hint when a program fails it).
std::string example_line(const std::string& function, const ProgramTest& test);

// Runs `solution` (Python source that defines `function`) against `tests`.
ProgramScore score_program(const Sandbox& sandbox, const std::string& solution, const std::string& function,
                           const std::vector<ProgramTest>& tests);

}  // namespace rlx
