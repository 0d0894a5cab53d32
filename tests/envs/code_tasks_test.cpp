// The code task family and its scorer: every family's reference program
// passes its hidden tests in the sandbox, wrong programs do not, tasks are
// rebuilt from their ids alone, and a program cannot see the hidden tests
// (they never enter the sandbox). Needs bubblewrap.
#include <set>

#include <catch2/catch.hpp>

#include "envs/code/code_scorer.hpp"
#include "envs/code/code_tasks.hpp"

using namespace rlx;

namespace {

RewardResultData score(const CodeScorer& scorer, const std::string& task, const std::string& program) {
  return scorer.score(RewardRequestData{7, 3, task, program});
}

std::shared_ptr<const CodeScorer> scorer() {
  auto s = CodeScorer::open();
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("code tasks are rebuilt from their id alone, differ by seed and family, and keep hidden tests apart",
          "[envs][code]") {
  REQUIRE(code_task_families().size() >= 6);
  for (const auto& family : code_task_families()) {
    auto a = make_code_task(family, 11);
    REQUIRE(a.ok());
    CHECK(a->id == family + ":11");
    CHECK(a->examples.size() == 2);
    CHECK(a->hidden.size() == 8);
    CHECK_FALSE(a->spec.empty());
    auto again = code_task(a->id);
    REQUIRE(again.ok());
    CHECK(again->spec == a->spec);
    for (std::size_t i = 0; i < a->hidden.size(); ++i) CHECK(again->hidden[i].args_json == a->hidden[i].args_json);
    // Another seed gives other tests (inputs are drawn from the seed).
    std::set<std::string> inputs;
    for (std::uint64_t seed = 0; seed < 5; ++seed) {
      const CodeTask other = *make_code_task(family, seed);
      for (const auto& t : other.hidden) inputs.insert(t.args_json);
    }
    CHECK(inputs.size() > a->hidden.size());
  }
  CHECK(make_code_task("add_k", 3)->spec != make_code_task("add_k", 4)->spec);
  CHECK(make_code_task("nope", 1).error().code == Errc::config_unknown_name);
  for (const char* bad : {"", "add_k", "add_k:", ":3", "add_k:x", "add_k:3x", "nope:3"})
    CHECK(code_task(bad).error().code == Errc::invalid_field);
}

TEST_CASE("the code scorer gives every family's reference program 1 and wrong programs less, with the reason",
          "[envs][code][sandbox]") {
  auto s = scorer();
  for (const auto& family : code_task_families()) {
    const CodeTask task = *make_code_task(family, 5);
    INFO(task.id << ": " << task.spec);
    const RewardResultData right = score(*s, task.id, task.reference);
    INFO(right.reason);
    CHECK(right.ok);
    CHECK(right.request_id == 7);
    CHECK(right.score == 1.0f);
    CHECK(right.hint.empty());  // nothing failed, nothing to hint
    const RewardResultData wrong = score(*s, task.id, "def solve(*args):\n    return None\n");
    CHECK(wrong.ok);
    CHECK(wrong.score < 1.0f);
    CHECK(wrong.reason.find("passed") != std::string::npos);
    // The hint is a hidden test it failed, as a line of the prompt's form.
    bool hidden_test = false;
    for (const auto& t : task.hidden) hidden_test = hidden_test || wrong.hint == example_line(task.function, t);
    CHECK(hidden_test);
  }
  // Right on the visible examples only (hard-coded): the hidden tests tell.
  const CodeTask task = *make_code_task("sum_list", 2);
  std::string lookup = "def solve(xs):\n    table = {";
  for (const auto& e : task.examples) lookup += "str(" + e.args_json + "[0]): " + e.expected_json + ", ";
  lookup += "}\n    return table.get(str(xs), 0)\n";
  CHECK(score(*s, task.id, lookup).score < 0.5f);
  // Not a task: no score at all.
  const RewardResultData unknown = score(*s, "nope:1", task.reference);
  CHECK_FALSE(unknown.ok);
  CHECK(unknown.reason.find("nope") != std::string::npos);
  // A program that does not parse or never defines the function scores 0.
  const RewardResultData broken = score(*s, task.id, "def solve(xs) return 0");
  CHECK(broken.score == 0.0f);
  CHECK(broken.hint == example_line(task.function, task.hidden.front()));  // it failed them all: the first
  CHECK(score(*s, task.id, "x = 1\n").score == 0.0f);
}

TEST_CASE("a scorer is made by name, and an unknown one is refused", "[envs][code]") {
  CHECK(make_scorer("arithmetic").ok());
  CHECK(make_scorer("code").ok());
  CHECK(make_scorer("nope").error().code == Errc::config_unknown_name);
}
