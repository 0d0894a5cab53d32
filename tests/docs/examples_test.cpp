// Every example runs as its header says: each examples/*.toml's commands,
// typed from a folder laid out as the repository root (the examples
// linked into examples/, runs/ written beside them), with `rlx sft` cut
// to two steps and `rlx launch` stopped after a few updates. An example
// whose header no longer starts fails here.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "tests/docs/example_header.hpp"
#include "tests/helpers.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kExamples = fs::path(RLX_SOURCE_DIR) / "examples";

// The examples this file runs: one test case each, so a new example
// without one fails "every example has a test that runs it".
const std::set<std::string> kRun = {
    "cartpole-vtrace", "cartpole-sync", "cartpole-split", "cartpole-python", "sum-task", "arithmetic-tokens", "code",
    "agent",           "agent-start",   "agent-copy",     "agent-lora",      "harness",  "harness-agent",     "hf-moe",
    "hf-dense",        "hf-lora"};

std::string step_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Step {
  std::string command;  // as run
  std::string output;
  int code = -1;
};

struct ExampleRun {
  fs::path root;  // the repository root it ran from
  std::vector<Step> steps;
};

// The header's commands of examples/NAME.toml, in a temporary root: `rlx
// sft` at two steps (one that trains) and one evaluation task, `rlx launch` with
// run.stop.max_updates = `updates` and the `extra` overrides, a command
// ending in `&` in the background (waited for at the end), each bounded.
ExampleRun run_example(const std::string& name, int updates, const std::string& extra, rlx::test::TempDir& t) {
  const auto header = rlx::test::read_example_header(kExamples / (name + ".toml"));
  REQUIRE_FALSE(header.commands.empty());
  ExampleRun run{t.path, {}};
  fs::create_directories(t.path / "examples");
  for (const auto& e : fs::directory_iterator(kExamples))
    fs::create_symlink(e.path(), t.path / "examples" / e.path().filename());
  const std::string rlx = RLX_BINARY;
  const std::string tools = fs::path(rlx).parent_path().string();
  std::ostringstream script;
  script << "cd '" << t.path.string() << "'\nexport PATH='" << tools << "':\"$PATH\"\n";
  int background = 0;
  for (std::size_t i = 0; i < header.commands.size(); ++i) {
    std::string c = header.commands[i];
    const bool bg = c.ends_with("&");
    if (bg) c = c.substr(0, c.find_last_not_of(" &") + 1);
    for (auto at = c.find("build/tools/rlx"); at != std::string::npos; at = c.find("build/tools/rlx", at + rlx.size()))
      c.replace(at, std::string("build/tools/rlx").size(), rlx);
    if (c.find(" sft ") != std::string::npos) {
      c = std::regex_replace(c, std::regex("--steps [1-9][0-9]*"), "--steps 2");
      c += " --eval-tasks 1 --eval-every 0";
    }
    if (c.find(" launch ") != std::string::npos)
      c += " --set run.stop.max_updates=" + std::to_string(updates) + " --set run.stop.max_seconds=400 " + extra;
    run.steps.push_back(Step{c, "", -1});
    const std::string out = "step" + std::to_string(i);
    const std::string bounded = "timeout -k 10 480 " + c + " > " + out + ".out 2>&1";
    // An export reads the run's last checkpoint: as a user would, once the
    // run in the background has ended.
    if (background && c.find(" export ") != std::string::npos) {
      script << "wait\n";
      background = 0;
    }
    if (bg) {
      script << "( " << bounded << "; echo $? > " << out << ".rc ) &\n";
      ++background;
    } else {
      script << bounded << "; echo $? > " << out << ".rc\n";
    }
  }
  if (background) script << "wait\n";
  std::ofstream(t.path / "run.sh") << script.str();
  rlx::test::run_command("bash " + (t.path / "run.sh").string());
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const auto out = t.path / ("step" + std::to_string(i));
    run.steps[i].output = step_text(out.string() + ".out");
    const auto rc = step_text(out.string() + ".rc");
    run.steps[i].code = rc.empty() ? -1 : std::stoi(rc);
  }
  return run;
}

// Each step ended as it should (launch: 3, its update budget spent, or 0
// solved; the rest 0), and the run wrote its metrics where the topology's
// log_dir says, beside examples/ (a relative path is from the file's folder).
void check_ran(const ExampleRun& run, const std::string& log_dir) {
  for (const auto& s : run.steps) {
    INFO(s.command << "\n" << s.output.substr(s.output.size() > 4000 ? s.output.size() - 4000 : 0));
    if (s.command.find(" launch ") != std::string::npos) {
      CHECK((s.code == 3 || s.code == 0));
      // The run's summary: segments were trained, none lost.
      std::smatch m;
      REQUIRE(std::regex_search(s.output, m, std::regex("segments produced [0-9]+: trained ([0-9]+) / .* / lost 0")));
      CHECK(std::stoi(m[1]) > 0);
    } else {
      CHECK(s.code == 0);
    }
  }
  CHECK(fs::exists(run.root / "runs" / log_dir / "metrics.jsonl"));
}

}  // namespace

TEST_CASE("every example's header says what it does, how long it takes, what to expect and how to run it",
          "[docs][examples]") {
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(kExamples)) {
    if (e.path().extension() != ".toml") continue;
    const auto name = e.path().stem().string();
    found.insert(name);
    const auto h = rlx::test::read_example_header(e.path());
    INFO(e.path().string());
    CHECK(h.what.size() > 40);
    CHECK(std::regex_search(h.takes, std::regex("[0-9]+(-[0-9.]+)? (seconds|minutes?)")));
    CHECK(h.expect.size() > 10);
    REQUIRE_FALSE(h.commands.empty());
    // Its last launch names this file, from the repository root.
    const auto launch = std::find_if(h.commands.rbegin(), h.commands.rend(),
                                     [](const auto& c) { return c.starts_with("build/tools/rlx launch "); });
    REQUIRE(launch != h.commands.rend());
    CHECK(launch->starts_with("build/tools/rlx launch examples/" + name + ".toml"));
  }
  CHECK(found == kRun);  // every example has a test that runs it
}

TEST_CASE("the CartPole examples run as their headers say", "[docs][examples][e2e][slow]") {
  for (const auto& [name, log_dir] : std::vector<std::pair<std::string, std::string>>{
           {"cartpole-vtrace", "cartpole-vtrace"},
           {"cartpole-sync", "cartpole-sync"},
           {"cartpole-split", "cartpole-split"},
           {"cartpole-python", "cartpole-python"},
           {"sum-task", "sum-task"}}) {
    DYNAMIC_SECTION(name) {
      rlx::test::TempDir t("rlx-example-" + name);
      check_ran(run_example(name, 3, "", t), log_dir);
    }
  }
}

TEST_CASE("the token examples run as their headers say: a supervised start, then RL from it",
          "[docs][examples][token][sandbox][e2e][slow]") {
  for (const auto& [name, log_dir] : std::vector<std::pair<std::string, std::string>>{
           {"arithmetic-tokens", "arithmetic-tokens"}, {"code", "code"}, {"hf-moe", "hf-moe/rl"}}) {
    DYNAMIC_SECTION(name) {
      rlx::test::TempDir t("rlx-example-" + name);
      const auto run = run_example(name, 2, "--set tokens.eval_tasks=2", t);
      check_ran(run, log_dir);
      if (name == "hf-moe") CHECK(fs::exists(t.path / "runs" / "hf-moe" / "export" / "config.json"));
    }
  }
}

TEST_CASE("the agent examples run as their headers say, from their shipped starts",
          "[docs][examples][workspace][sandbox][e2e][slow]") {
  for (const std::string name : {"agent", "agent-start", "agent-copy", "agent-lora"}) {
    DYNAMIC_SECTION(name) {
      rlx::test::TempDir t("rlx-example-" + name);
      const auto run = run_example(name, 1, "--set tokens.eval_tasks=1 --set tokens.max_new_tokens=160", t);
      check_ran(run, name);
      if (name == "agent-lora") {  // the end weights evaluated: the run's adapters over the frozen start
        REQUIRE(run.steps.size() == 2);
        CHECK(run.steps[1].output.find("adapters and heads from learner checkpoint") != std::string::npos);
      }
    }
  }
}

TEST_CASE(
    "the harness examples run as their headers say: the run in the background, the harness beside it (a dense "
    "Llama-shaped model for hf-dense, LoRA adapters exported for hf-lora)",
    "[docs][examples][gateway][e2e][slow]") {
  for (const std::string name : {"harness", "harness-agent", "hf-dense", "hf-lora"}) {
    DYNAMIC_SECTION(name) {
      rlx::test::TempDir t("rlx-example-" + name);
      const auto run = run_example(name, 2, "", t);
      check_ran(run, name);
      const std::size_t steps = name == "hf-lora" ? 5 : name == "hf-dense" ? 3 : 2;
      REQUIRE(run.steps.size() == steps);
      CHECK(run.steps[steps == 2 ? 1 : 2].output.find("sessions") != std::string::npos);
      if (name == "hf-lora") {  // its adapters as PEFT's, and merged into a checkpoint
        CHECK(run.steps[3].output.find("adapted modules, rank 8") != std::string::npos);
        CHECK(fs::exists(t.path / "runs" / "hf-lora" / "adapter" / "adapter_model.safetensors"));
        CHECK(fs::exists(t.path / "runs" / "hf-lora" / "merged" / "config.json"));
      }
    }
  }
}
