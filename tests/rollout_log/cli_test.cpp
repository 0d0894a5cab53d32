// rlx inspect / replay / plot as a user runs them: exit codes, messages,
// files written.
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "core/config.hpp"
#include "envs/env.hpp"
#include "learner/trainer.hpp"
#include "policy/threads.hpp"
#include "tools/embedded_config.hpp"
#include "tests/rollout_log/log_fixture.hpp"

using namespace rlx;
using namespace rlx::test;

namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// `env`: what `env` (the command) is given before the binary, if anything.
CliRun run_cli(const std::string& args, const fs::path& dir, const std::string& env = "") {
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(RLX_BINARY) + " " + args + " > " +
                          out.string() + " 2> " + err.string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto o = read_bytes(out), e = read_bytes(err);
  r.out.assign(o.begin(), o.end());
  r.err.assign(e.begin(), e.end());
  return r;
}

bool is_png(const fs::path& p) {
  auto b = read_bytes(p);
  return b.size() > 1000 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G';
}

}  // namespace

TEST_CASE("rlx inspect summarises a log as text, JSON and a plot", "[replay][inspect][tools]") {
  TempDir t("rlx-cli-inspect");
  write_log(LogWriterOptions{t.path / "rollouts"}, 12);
  auto text = run_cli("inspect " + t.path.string(), t.path);
  INFO(text.err);
  REQUIRE(text.code == 0);
  CHECK(text.out.find("segments     12: trained 12, dropped stale 0, rejected 0") != std::string::npos);
  CHECK(text.out.find("lag at admission") != std::string::npos);
  CHECK(text.out.find("returns over time") != std::string::npos);
  auto json = run_cli("inspect --json " + t.path.string(), t.path);
  REQUIRE(json.code == 0);
  CHECK(json.out.find("\"segments\":12,") != std::string::npos);
  CHECK(json.out.find("\"explorers\":{\"0\":{\"segments\":6,") != std::string::npos);
  auto plot = run_cli("inspect " + t.path.string() + " --plot " + (t.path / "log.png").string(), t.path);
  INFO(plot.err);
  REQUIRE(plot.code == 0);
  CHECK(is_png(t.path / "log.png"));
}

TEST_CASE("rlx inspect and replay stop with exit code 2 at a damaged record unless told to skip it",
          "[replay][inspect][damage][tools]") {
  TempDir t("rlx-cli-damaged");
  write_log(LogWriterOptions{t.path / "rollouts"}, 8);
  const auto file = logfiles::data_path(t.path / "rollouts", 0);
  auto index = read_index(logfiles::index_path(t.path / "rollouts", 0));
  auto bytes = read_bytes(file);
  bytes[index[4].offset + index[4].bytes - 24] ^= 0xff;
  write_bytes(file, bytes);
  const std::string where = "rollouts-000000.capnp at byte " + std::to_string(index[4].offset);

  auto strict = run_cli("inspect " + t.path.string(), t.path);
  CHECK(strict.code == 2);
  CHECK(strict.err.find(where) != std::string::npos);
  auto replay = run_cli("replay " + t.path.string(), t.path);
  CHECK(replay.code == 2);
  CHECK(replay.err.find(where) != std::string::npos);

  auto lenient = run_cli("inspect --skip-bad " + t.path.string(), t.path);
  CHECK(lenient.code == 0);
  CHECK(lenient.out.find("segments     7:") != std::string::npos);
  CHECK(lenient.out.find("bad record: ") != std::string::npos);
}

TEST_CASE("rlx inspect names a truncated last record and only warns about a missing index", "[replay][inspect][damage][tools]") {
  TempDir t("rlx-cli-truncated");
  write_log(LogWriterOptions{t.path / "rollouts"}, 5);
  const auto file = logfiles::data_path(t.path / "rollouts", 0);
  auto index = read_index(logfiles::index_path(t.path / "rollouts", 0));
  auto bytes = read_bytes(file);
  bytes.resize(bytes.size() - 3);
  write_bytes(file, bytes);
  auto strict = run_cli("inspect " + t.path.string(), t.path);
  CHECK(strict.code == 2);
  CHECK(strict.err.find("rollouts-000000.capnp at byte " + std::to_string(index.back().offset) + ": truncated_message") !=
        std::string::npos);
  auto lenient = run_cli("inspect --skip-bad --json " + t.path.string(), t.path);
  CHECK(lenient.code == 0);
  CHECK(lenient.out.find("\"fatal\":true") != std::string::npos);

  bytes.resize(index.back().offset);  // a clean cut: what a resume leaves
  write_bytes(file, bytes);
  std::filesystem::remove(logfiles::index_path(t.path / "rollouts", 0));
  auto noindex = run_cli("inspect " + t.path.string(), t.path);
  CHECK(noindex.code == 0);
  CHECK(noindex.out.find("warning: ") != std::string::npos);
  CHECK(noindex.out.find("rollouts-000000.idx missing") != std::string::npos);
}

TEST_CASE("rlx replay exits 1 and names the version when the weights differ from the log", "[replay][exact][tools]") {
  TempDir t("rlx-cli-diverged");
  write_log(LogWriterOptions{t.path / "rollouts"}, 4);  // its weights entries carry a made-up checksum
  auto r = run_cli("replay " + t.path.string(), t.path);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.find("diverged at ") != std::string::npos);
  CHECK(r.out.find("recorded v1 000000000000002a") != std::string::npos);
}

TEST_CASE("rlx launch --resume refuses a log its replay differs from, naming the version, and --resume-diverged goes on loudly",
          "[replay][resume][tools]") {
  TempDir t("rlx-cli-resume-diverged");
  write_log(LogWriterOptions{t.path / "rollouts"}, 4);  // v1's checksum in it is made up: no replay matches it
  std::string toml = embedded_cluster_toml();
  toml.replace(toml.find("runs/cartpole"), std::string("runs/cartpole").size(), t.path.string());
  toml.replace(toml.find("max_env_steps = 2_000_000"), std::string("max_env_steps = 2_000_000").size(),
               "max_env_steps = 3000");
  std::ofstream(t.path / "run.toml") << toml;
  auto refused = run_cli("launch " + (t.path / "run.toml").string() + " --resume", t.path);
  INFO(refused.out << refused.err);
  CHECK(refused.code == 2);
  CHECK(refused.out.find("differs from the rollout log") != std::string::npos);  // the run's summary line
  CHECK(refused.out.find("first at v1 ") != std::string::npos);
  CHECK(refused.out.find("the log holds 000000000000002a") != std::string::npos);
  CHECK(refused.out.find("--resume-diverged resumes anyway") != std::string::npos);
  auto forced = run_cli("launch " + (t.path / "run.toml").string() + " --resume --resume-diverged", t.path);
  INFO(forced.out << forced.err);
  CHECK(forced.code == 3);  // went on to its step budget
  CHECK(forced.err.find("RESUMING A DIVERGED RUN") != std::string::npos);
}

TEST_CASE("rlx plot draws a run's metrics.jsonl and skips unreadable lines", "[replay][plot][tools]") {
  TempDir t("rlx-cli-plot");
  {
    std::ofstream m(t.path / "metrics.jsonl");
    for (int i = 1; i <= 20; ++i)
      m << "{\"time_s\":" << i << ",\"env_steps\":" << i * 1000 << ",\"mean_return\":" << 20 + i * 10
        << ",\"lag_mean\":1.5,\"lag_max\":" << (i % 3) << ",\"policy_loss\":0.01,\"value_loss\":" << 40 - i
        << ",\"entropy\":0.6}\n";
    m << "{\"time_s\": garbage\n";
  }
  auto r = run_cli("plot " + t.path.string(), t.path);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(is_png(t.path / "metrics.png"));
  CHECK(r.err.find("skipped 1 unreadable lines") != std::string::npos);
  auto missing = run_cli("plot " + (t.path / "nowhere").string(), t.path);
  CHECK(missing.code == 2);
}

TEST_CASE("rlx sft writes weights a token run can start from, and refuses a GPU this machine lacks", "[tools][token][sft]") {
  TempDir t("rlx-sft-cli");
  const auto& dir = t.path;
  const auto out = dir / "policy.pt";
  auto r = run_cli("sft --kind arithmetic --steps 2 --eval-tasks 2 --out " + out.string(), dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("after training, step 2: held-out pass@1") != std::string::npos);
  PolicyConfig policy;
  policy.kind = PolicyKind::moe_transformer;
  policy.init = out.string();
  CHECK(check_policy_init(policy, TokensConfig{}).ok());
  // A time limit ends training at the step that runs past it, evaluated and written as at the last step.
  const auto timed = dir / "timed.pt";
  auto limited = run_cli("sft --kind arithmetic --steps 100000 --seconds 0.001 --eval-every 0 --eval-tasks 2 --out " +
                             timed.string(),
                         dir);
  INFO(limited.out << limited.err);
  REQUIRE(limited.code == 0);
  CHECK(limited.out.find("stopped at step 1: --seconds 0.001 reached") != std::string::npos);
  CHECK(limited.out.find("after training, step 1: held-out pass@1") != std::string::npos);
  CHECK(fs::exists(timed));
  // With a time limit sooner than the steps, the time left shown is what the limit leaves.
  auto paced = run_cli("sft --kind arithmetic --steps 1000000 --seconds 3 --eval-every 0 --eval-tasks 2 --out " +
                           (dir / "paced.pt").string(),
                       dir);
  INFO(paced.out << paced.err);
  REQUIRE(paced.code == 0);
  // Step 1's line: the first step ends long before 3 s even on a loaded machine (step 20 did not, in a CI run
  // beside a training run).
  const auto first = paced.out.find("step 1/1000000 ");
  REQUIRE(first != std::string::npos);
  const auto shown = paced.out.find(" s left", first);
  REQUIRE(shown != std::string::npos);
  const auto tilde = paced.out.rfind('~', shown);
  REQUIRE(tilde != std::string::npos);
  const std::string left = paced.out.substr(tilde + 1, shown - tilde - 1);  // "2" in "~2 s left", not "8069 h 34 min"
  REQUIRE((!left.empty() && left.size() <= 2 && left.find_first_not_of("0123456789") == std::string::npos));
  CHECK(std::stoi(left) <= 3);
  // No steps: the start is evaluated and nothing is written.
  auto none = run_cli("sft --kind arithmetic --steps 0 --eval-tasks 2 --out " + (dir / "none.pt").string(), dir);
  CHECK(none.code == 0);
  CHECK(none.out.find("before training, step 0: held-out pass@1") != std::string::npos);
  CHECK(none.out.find("--steps 0: the start evaluated; nothing trained or written") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "none.pt"));
  if (check_device("cuda").ok()) return;  // a GPU here: nothing to refuse
  auto gpu = run_cli("sft --kind arithmetic --steps 2 --device cuda --out " + (dir / "gpu.pt").string(), dir);
  CHECK(gpu.code == 2);
  CHECK(gpu.err.find("no CUDA or no GPU is visible") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "gpu.pt"));
}

// Each line libgomp prints of GOMP_SPINCOUNT as it loads (OMP_DISPLAY_ENV=VERBOSE): one per program image.
std::vector<std::string> spin_counts(const std::string& err) {
  std::vector<std::string> counts;
  const std::string key = "GOMP_SPINCOUNT = '";
  for (auto at = err.find(key); at != std::string::npos; at = err.find(key, at + 1))
    counts.push_back(err.substr(at + key.size(), err.find('\'', at + key.size()) - at - key.size()));
  return counts;
}

TEST_CASE("idle compute threads are set to sleep only where the environment has not chosen", "[tools][threads]") {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  const auto with = [](std::map<std::string, std::string> env) {
    return sleeping_thread_settings([env = std::move(env)](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  CHECK(with({}) == Settings{{"OMP_WAIT_POLICY", "PASSIVE"}, {"OPENBLAS_THREAD_TIMEOUT", "4"}});
  CHECK(with({{"OMP_WAIT_POLICY", "ACTIVE"}}) == Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}});
  CHECK(with({{"GOMP_SPINCOUNT", "10"}}) == Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}});
  CHECK(with({{"OPENBLAS_THREAD_TIMEOUT", "8"}}) == Settings{{"OMP_WAIT_POLICY", "PASSIVE"}});
  CHECK(with({{"GOTO_THREAD_TIMEOUT", "8"}}) == Settings{{"OMP_WAIT_POLICY", "PASSIVE"}});
  CHECK(with({{"OMP_WAIT_POLICY", "PASSIVE"}, {"OPENBLAS_THREAD_TIMEOUT", "4"}}).empty());
}

TEST_CASE("a computing rlx command runs itself again with OpenMP threads that sleep, unless the environment chose",
          "[tools][threads]") {
  TempDir t("rlx-omp-cli");
  const std::string clean =
      "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OPENBLAS_THREAD_TIMEOUT -u GOTO_THREAD_TIMEOUT OMP_DISPLAY_ENV=VERBOSE";
  // Unset: the first image spins (libgomp's default), the one it runs again does not.
  auto rerun = run_cli("sft --kind arithmetic --steps 0 --eval-tasks 1", t.path, clean);
  INFO(rerun.err);
  CHECK(rerun.code == 0);
  const auto counts = spin_counts(rerun.err);
  REQUIRE(counts.size() == 2);
  CHECK(counts[0] != "0");
  CHECK(counts[1] == "0");
  // Both chosen: the choice stands, and nothing runs twice.
  auto chosen = run_cli("sft --kind arithmetic --steps 0 --eval-tasks 1", t.path,
                        clean + " GOMP_SPINCOUNT=1000 OPENBLAS_THREAD_TIMEOUT=10");
  CHECK(chosen.code == 0);
  CHECK(spin_counts(chosen.err) == std::vector<std::string>{"1000"});
  // OpenMP's chosen, OpenBLAS's not: run again for OpenBLAS, OpenMP's choice kept.
  auto half = run_cli("sft --kind arithmetic --steps 0 --eval-tasks 1", t.path, clean + " GOMP_SPINCOUNT=1000");
  CHECK(half.code == 0);
  CHECK(spin_counts(half.err) == std::vector<std::string>{"1000", "1000"});
  // A command that computes nothing is not run again.
  auto quick = run_cli("plot " + (t.path / "none").string() + " --out " + (t.path / "p.png").string(), t.path, clean);
  REQUIRE(spin_counts(quick.err).size() == 1);
  CHECK(spin_counts(quick.err)[0] != "0");
}

TEST_CASE("rlx sft trains on the expert's workspace transcripts in the shape a config names, and needs that config",
          "[tools][token][sft][workspace][sandbox]") {
  TempDir t("rlx-sft-workspace");
  const auto& dir = t.path;
  // examples/agent.toml with a policy small enough for a test, its
  // vocabulary named where it lies (a relative path is from the config's folder).
  std::ifstream in(RLX_SOURCE_DIR "/examples/agent.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string cfg = text.str();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"d_model = 64", "d_model = 16"},
                                 {"expert_hidden = 128", "expert_hidden = 16"},
                                 {"tokenizer = \"agent-bpe1024.vocab\"",
                                  "tokenizer = \"" RLX_SOURCE_DIR "/examples/agent-bpe1024.vocab\""}}) {
    REQUIRE(cfg.find(from) != std::string::npos);
    cfg.replace(cfg.find(from), from.size(), to);
  }
  std::ofstream(dir / "agent.toml") << cfg;
  const auto out = dir / "agent.pt";
  auto r = run_cli("sft --config " + (dir / "agent.toml").string() +
                       " --steps 1 --batch 2 --drills 1 --recoveries 2 --eval-tasks 1 --eval-every 0 --out " +
                       out.string(),
                   dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("after training, step 1: held-out pass@1") != std::string::npos);
  CHECK(r.out.find("fresh training tasks pass@1") != std::string::npos);
  CHECK(r.out.find("a hole's body rewritten in ") != std::string::npos);
  // One task a split: each split's outcomes count it once.
  CHECK(std::regex_search(r.out, std::regex("how episodes ended, held-out: [A-Za-z ]+ 1; fresh training: [A-Za-z ]+ 1\n")));
  // The expert's transcripts of the same tasks, teacher-forced, before and after training.
  const std::regex scored("the expert's transcripts teacher-forced, held-out: [^;]+(; in the edits alone [^;]+)?; fresh "
                          "training: loss ([0-9.]+) per target token, the policy's top token in ([0-9.]+); in the "
                          "edits alone ([0-9.]+) and ([0-9.]+) \\(1 of 1 transcripts within the budget\\)\n");
  std::vector<double> losses;
  for (std::sregex_iterator m(r.out.begin(), r.out.end(), scored), end; m != end; ++m) {
    losses.push_back(std::stod((*m)[2]));
    CHECK(std::stod((*m)[3]) <= 1.0);
    CHECK(std::stod((*m)[4]) > 0.0);  // the fix turn was found and scored
    CHECK(std::stod((*m)[5]) <= 1.0);
  }
  REQUIRE(losses.size() == 2);
  CHECK(losses[0] > 0.5);  // an untrained policy of this vocabulary: far from the expert's tokens
  auto loaded = load_config((dir / "agent.toml").string(), builtin_envs().names());
  REQUIRE(loaded.ok());
  loaded->policy.init = out.string();
  CHECK(check_policy_init(loaded->policy, loaded->tokens).ok());  // the RL run starts from it
  // With that [policy] init, rlx sft continues from it (RL's fair baseline).
  {
    std::string c = cfg;
    c.replace(c.find("[policy]\n"), 9, "[policy]\ninit = \"" + out.string() + "\"\n");
    std::ofstream(dir / "continued.toml") << c;
  }
  auto again = run_cli("sft --config " + (dir / "continued.toml").string() +
                           " --steps 1 --batch 2 --eval-tasks 1 --eval-every 0 --out " + (dir / "again.pt").string(),
                       dir);
  INFO(again.out << again.err);
  CHECK(again.code == 0);
  CHECK(again.out.find("starting from " + out.string()) != std::string::npos);
  // Under the character vocabulary those weights do not fit: refused at start.
  loaded->tokens.tokenizer = "";
  CHECK_FALSE(check_policy_init(loaded->policy, loaded->tokens).ok());
  // A vocabulary that is not there: a clear error, not a crash.
  {
    std::string c = cfg;
    const std::string from = "tokenizer = \"" RLX_SOURCE_DIR "/examples/agent-bpe1024.vocab\"";
    c.replace(c.find(from), from.size(), "tokenizer = \"missing.vocab\"");
    std::ofstream(dir / "missing.toml") << c;
  }
  auto missing = run_cli("sft --config " + (dir / "missing.toml").string() + " --steps 1 --out " + (dir / "m.pt").string(), dir);
  CHECK(missing.code == 2);
  CHECK(missing.err.find((dir / "missing.vocab").string()) != std::string::npos);
  auto bare = run_cli("sft --kind workspace --steps 1 --out " + (dir / "bare.pt").string(), dir);
  CHECK(bare.code == 2);
  CHECK(bare.err.find("need --config") != std::string::npos);
}

TEST_CASE("the shipped agent start loads into examples/agent-start.toml's policy and plays tool calls that run",
          "[tools][token][sft][workspace][sandbox][slow]") {
  TempDir t("rlx-agent-start");
  const std::string config = RLX_SOURCE_DIR "/examples/agent-start.toml";
  auto loaded = load_config(config, builtin_envs().names());
  REQUIRE(loaded.ok());
  CHECK(loaded->policy.init == (fs::path(RLX_SOURCE_DIR) / "examples" / "agent-start.bin").lexically_normal().string());
  CHECK(check_policy_init(loaded->policy, loaded->tokens).ok());
  // The same weights in a policy of another width are refused, as a run would refuse them.
  auto narrow = *loaded;
  narrow.policy.d_model = 64;
  CHECK_FALSE(check_policy_init(narrow.policy, narrow.tokens).ok());
  // Played greedily on the first fresh training tasks, the start makes tool
  // calls that run (random weights of this shape make none: 0.0 an episode,
  // docs/results/agent-workload.md "A shipped start").
  auto r = run_cli("sft --config " + config + " --steps 0 --eval-tasks 4 --out " + (t.path / "w.bin").string(), t.path);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto at = r.out.find("fresh training tasks pass@1");
  REQUIRE(at != std::string::npos);
  const auto turns = r.out.find(" turns, ", at);
  REQUIRE(turns != std::string::npos);
  CHECK(std::stod(r.out.substr(turns + 8)) >= 1.0);  // "N tool calls" an episode
}

TEST_CASE("the shipped copy-head start plays examples/agent-copy.toml's held-out tasks with no name the context "
          "lacks, where free decoding of the same weights writes such names",
          "[tools][token][workspace][rule][sandbox][slow]") {
  TempDir t("rlx-agent-copy");
  const std::string config = RLX_SOURCE_DIR "/examples/agent-copy.toml";
  auto loaded = load_config(config, builtin_envs().names());
  REQUIRE(loaded.ok());
  CHECK(loaded->policy.copy_head);
  CHECK(loaded->tokens.edit_names == "context");
  CHECK(check_policy_init(loaded->policy, loaded->tokens).ok());
  // The held-out episodes' NameErrors, as the evaluator counts how they end.
  auto name_errors = [&](const std::string& config_path) {
    auto r = run_cli("sft --config " + config_path + " --steps 0 --eval-tasks 8", t.path);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    const auto at = r.out.find("how episodes ended, held-out: ");
    REQUIRE(at != std::string::npos);
    const auto line = r.out.substr(at, r.out.find("; fresh training:", at) - at);
    const auto n = line.find("NameError ");
    return n == std::string::npos ? 0 : std::stoi(line.substr(n + 10));
  };
  // The same config with free names (its files named by absolute paths: the copy is elsewhere).
  std::string text;
  {
    auto b = read_bytes(config);
    text.assign(b.begin(), b.end());
  }
  const std::string examples = RLX_SOURCE_DIR "/examples/";
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\nedit_names = \"context\"", "\nedit_names = \"free\""},  // the line, not the header's words
           {"init = \"agent-copy.bin\"", "init = \"" + examples + "agent-copy.bin\""},
           {"tokenizer = \"agent-bpe1024.vocab\"", "tokenizer = \"" + examples + "agent-bpe1024.vocab\""}}) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  const auto free_config = t.path / "free.toml";
  std::ofstream(free_config) << text;
  CHECK(name_errors(free_config.string()) > 0);
  CHECK(name_errors(config) == 0);
}
