#include "envs/code/program_tests.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace rlx {

namespace {

constexpr const char* kMarker = "\x1eRLX-RESULT ";

// The driver: reads the inputs (one JSON array per line) from stdin, prints
// "<marker><index> <answer as compact JSON>" per test ("null" line: raised).
std::string driver(const std::string& function) {
  return fmt::format(R"PY(

# --- the RLX test driver (appended) ---
def _rlx_drive():
    import json, sys
    for i, line in enumerate(sys.stdin.read().splitlines()):
        try:
            answer = json.dumps({0}(*json.loads(line)), separators=(",", ":"), sort_keys=True)
        except Exception as e:
            answer = "!" + type(e).__name__
        sys.stdout.write("\x1eRLX-RESULT %d %s\n" % (i, answer))
    sys.stdout.flush()
_rlx_drive()
)PY",
                     function);
}

}  // namespace

std::string last_line(const std::string& text) {
  const auto end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const auto start = text.rfind('\n', end);
  const auto from = start == std::string::npos ? 0 : start + 1;
  return text.substr(from, std::min<std::size_t>(end - from + 1, 200));
}

InfraFailure machinery_failure(const SandboxRun& run) {
  if (!run.machinery_failed()) return InfraFailure::none;
  return run.end == SandboxRun::End::not_started    ? InfraFailure::sandbox_start
         : run.end == SandboxRun::End::setup_failed ? InfraFailure::sandbox_setup
                                                    : InfraFailure::overloaded;
}

std::string example_line(const std::string& function, const ProgramTest& test) {
  return "# " + function + "(*" + test.args_json + ") == " + test.expected_json + "\n";
}

ProgramScore score_program(const Sandbox& sandbox, const std::string& solution, const std::string& function,
                           const std::vector<ProgramTest>& tests) {
  ProgramScore s;
  s.total = tests.size();
  std::string input;
  for (const auto& t : tests) input += t.args_json + "\n";
  s.run = sandbox.run(solution + driver(function), input);
  // The last answer printed for each test counts (the program may print anything before).
  std::map<std::size_t, std::string> answers;
  std::istringstream lines(s.run.out);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(kMarker);
    if (at == std::string::npos) continue;
    std::istringstream rest(line.substr(at + std::char_traits<char>::length(kMarker)));
    std::size_t i = 0;
    std::string answer;
    if (rest >> i && rest.get() == ' ' && std::getline(rest, answer)) answers[i] = answer;
  }
  std::string failed;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    auto a = answers.find(i);
    if (a != answers.end() && a->second == tests[i].expected_json) {
      ++s.passed;
      continue;
    }
    if (!s.first_failed) s.first_failed = i;
    if (failed.empty() && a != answers.end() && !a->second.empty() && a->second[0] == '!') {
      failed = fmt::format("; test {} raised {}", i, a->second.substr(1));
    }
  }
  s.reward = s.total ? static_cast<double>(s.passed) / static_cast<double>(s.total) : 0.0;
  if (s.run.machinery_failed()) {
    s.failure = machinery_failure(s.run);
    s.passed = 0;
    s.reward = 0;
    s.first_failed.reset();
    const std::string err = last_line(s.run.err);
    s.reason = "not scored (" + std::string(to_string(s.failure)) + "): " + s.run.reason() + (err.empty() ? "" : " (" + err + ")");
  } else if (!s.run.ok()) {
    // Whatever it answered before, a program that did not end cleanly scores 0.
    s.passed = 0;
    s.reward = 0;
    if (!tests.empty()) s.first_failed = s.first_failed.value_or(0);
    const std::string why = s.run.reason();
    const std::string err = last_line(s.run.err);
    s.reason = "scored 0: " + why + (err.empty() ? "" : " (" + err + ")");
  } else if (answers.empty() && !tests.empty()) {
    s.reason = "scored 0: no answers (" + last_line(s.run.err) + ")";
  } else {
    s.reason = fmt::format("passed {} of {}{}", s.passed, s.total, failed);
  }
  return s;
}

}  // namespace rlx
