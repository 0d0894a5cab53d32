// The files a topology names: one rule for every path key (relative to the
// topology file's folder), values set from the command line (--set), and a
// missing or unusable file stopping rlx with exit 2 naming the key and the
// path, before anything starts.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "core/config.hpp"
#include "core/topology_paths.hpp"
#include "envs/env.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

std::string cluster_toml() {
  std::ifstream in(RLX_SOURCE_DIR "/cluster.toml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `rlx ARGS` run in `dir`: its exit status and what it printed.
test::CommandOutput rlx_in(const fs::path& dir, const std::string& args) {
  return test::run_command("cd '" + dir.string() + "' && " RLX_BINARY " " + args + " 2>&1");
}

}  // namespace

TEST_CASE("every relative path a topology names is from the topology file's folder, made absolute when loaded",
          "[core][config][paths]") {
  test::TempDir t("rlx-paths-rule");
  fs::create_directories(t.path / "cfg");
  std::ofstream(t.path / "cfg" / "c.toml")
      << "[run]\nenv = \"exec:python3 envs/env.py\"\nlog_dir = \"../runs/x\"\n[policy]\ninit = \"w.bin\"\n"
         "[tokens]\ntokenizer = \"v/a.vocab\"\n[gateway]\ntoken_file = \"/abs/token\"\n"
         "[tls]\ncertificate = \"tls/c.pem\"\nkey = \"tls/k.pem\"\nca = \"tls/ca.pem\"\n"
      << "[[node]]\nname = \"head\"\nactors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\n"
         "explorers = 1\n";
  auto c = load_config((t.path / "cfg" / "c.toml").string(), builtin_envs().names());
  REQUIRE(c.ok());
  const auto cfg = (t.path / "cfg").lexically_normal();
  CHECK(c->run.log_dir == (t.path / "runs" / "x").lexically_normal().string());
  CHECK(c->policy.init == (cfg / "w.bin").string());
  CHECK(c->tokens.tokenizer == (cfg / "v" / "a.vocab").string());
  CHECK(c->gateway.token_file == "/abs/token");  // absolute paths stay as written
  CHECK(c->tls.certificate == (cfg / "tls" / "c.pem").string());
  CHECK(c->tls.key == (cfg / "tls" / "k.pem").string());
  CHECK(c->tls.ca == (cfg / "tls" / "ca.pem").string());
  // An exec: environment runs in the topology's folder, so its command's
  // relative paths are the file's too.
  CHECK(c->external.cwd == cfg.string());
  // Every path key is covered by the rule (the list docs/topology.md "Paths" names).
  CHECK(topology_path_keys() == std::vector<std::string>{"run.log_dir", "policy.init", "policy.init_adapter",
                                                         "tokens.tokenizer", "external.cwd", "gateway.token_file",
                                                         "tls.certificate", "tls.key", "tls.ca"});
  // What the nodes and the rollout log get is the resolved configuration.
  auto back = test::parse(to_toml(*c));
  REQUIRE(back.ok());
  CHECK(back->policy.init == c->policy.init);
  CHECK(back->external.cwd == c->external.cwd);
}

TEST_CASE("a value set with --set replaces the file's, is checked like it, and names the --set when refused",
          "[core][config][paths]") {
  const auto text = cluster_toml();
  const auto envs = builtin_envs().names();
  auto set = parse_config(text, "c.toml", envs, {"run.stop.max_updates=7", "learner.lr=5e-4", "run.name=bare-word",
                                                  "run.stop.max_seconds=1.5", "run.record=false"});
  REQUIRE(set.ok());
  CHECK(set->run.stop.max_updates == 7);
  CHECK(set->learner.lr == 5e-4);
  CHECK(set->run.name == "bare-word");
  CHECK(set->run.stop.max_seconds == 1.5);
  CHECK_FALSE(set->run.record);
  // A section the file lacks is made.
  auto section = parse_config(text, "c.toml", envs, {"gateway.session_timeout_s=30"});
  REQUIRE(section.ok());
  CHECK(section->gateway.session_timeout_s == 30);
  const auto refused = [&](const std::string& o, const std::string& what) {
    auto r = parse_config(text, "c.toml", envs, {o});
    INFO(o << ": " << (r ? std::string("accepted") : r.error().message));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::StartsWith("--set " + o) && Catch::Contains(what));
  };
  refused("run.stop.max_updates=-1", "allowed: integers");
  refused("learner.lr=fast", "learner.lr");
  refused("run.nope=1", "unknown key");
  refused("node.explorers=3", "node is not a table (an array: set it in the file)");
  refused("run.stop", "expected KEY=VALUE");
  refused("=3", "expected KEY=VALUE");
  refused("run..x=3", "expected KEY=VALUE");
  // A rule that a --set breaks names the key it is about, where the file sets it.
  auto rule = parse_config(text, "c.toml", envs, {"learner.algorithm=vtrace"});
  REQUIRE_FALSE(rule.ok());
  CHECK_THAT(rule.error().message, Catch::Matches("c\\.toml:[0-9]+:[0-9]+: key 'learner\\.correction' = \"none\": .*"));
  // The file's own errors still name the file and line.
  auto file_error = parse_config(text + "\n[explorer]\nsegment_steps = -4\n", "c.toml", envs);
  REQUIRE_FALSE(file_error.ok());
  CHECK_THAT(file_error.error().message, Catch::StartsWith("c.toml:"));
}

TEST_CASE("rlx launch stops with exit 2 naming the key and the path when a file the topology names is missing",
          "[core][config][paths][tools]") {
  test::TempDir t("rlx-paths-missing");
  fs::create_directories(t.path / "cfg");
  std::ofstream(t.path / "cfg" / "c.toml") << cluster_toml();
  std::ofstream(t.path / "cfg" / "a-file") << "not a folder\n";
  for (const char* f : {"c.pem", "k.pem", "ca.pem"}) std::ofstream(t.path / "cfg" / f) << "PEM\n";
  // Each key given a path that is not there (relative: resolved beside c.toml).
  for (const auto& [key, value, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"policy.init", "missing/w.bin", "no such file or folder"},
           {"policy.init", "hf:missing-model", "no such folder"},
           {"tokens.tokenizer", "missing.vocab", "no such file"},
           {"external.cwd", "missing-folder", "no such folder"},
           {"gateway.token_file", "missing-token", "no such file"},
           {"tls.certificate", "missing.pem", "no such file"},
           {"tls.key", "missing-key.pem", "no such file"},
           {"tls.ca", "missing-ca.pem", "no such file"},
           {"run.log_dir", "a-file/run", "a-file is a file, not a folder"}}) {
    const std::string shown = value.starts_with("hf:") ? value.substr(3) : value;
    const std::string path = ((t.path / "cfg") / shown).lexically_normal().string();
    // TLS takes its three files together: the other two are there.
    std::string tls;
    if (key.starts_with("tls."))
      for (const auto& [k, f] : {std::pair{"certificate", "c.pem"}, {"key", "k.pem"}, {"ca", "ca.pem"}})
        if (key != std::string("tls.") + k) tls += std::string(" --set tls.") + k + "=" + f;
    auto r = rlx_in(t.path, "launch cfg/c.toml --set '" + key + "=\"" + value + "\"'" + tls);
    INFO(key << " = " << value << ":\n" << r.out);
    CHECK(r.status == 2);
    CHECK_THAT(r.out, Catch::Contains(key + " = \"" + (value.starts_with("hf:") ? "hf:" : "") + path + "\": ") &&
                          Catch::Contains(expect));
    CHECK_THAT(r.out, Catch::Contains("docs/topology.md \"Paths\""));
    CHECK(r.out.find("InvariantError") == std::string::npos);
  }
  // A file that is there but is not weights: refused at start with the reason, not a crash.
  std::ofstream(t.path / "cfg" / "junk.bin") << "junk";
  auto junk = rlx_in(t.path, "launch cfg/c.toml --set policy.kind=moe_transformer --set run.env=tokens:arithmetic "
                             "--set learner.algorithm=grpo --set policy.init=junk.bin");
  INFO(junk.out);
  CHECK(junk.status == 2);
  CHECK_THAT(junk.out, Catch::Contains("junk.bin"));
  // rlx sft names the start it cannot find and how to make it.
  std::ofstream(t.path / "cfg" / "tokens.toml")
      << "[run]\nenv = \"tokens:arithmetic\"\n[policy]\nkind = \"moe_transformer\"\ninit = \"../runs/sft/w.pt\"\n"
         "[learner]\nalgorithm = \"grpo\"\n[[node]]\nname = \"head\"\nactors = [\"coordinator\", \"learner\", "
         "\"weight_store\", \"recorder\"]\nexplorers = 1\nenvs_per_explorer = 16\n";
  auto missing = rlx_in(t.path, "sft --config cfg/tokens.toml --steps 1 --out w.pt");
  INFO(missing.out);
  CHECK(missing.status == 2);
  CHECK_THAT(missing.out, Catch::Contains("policy.init = \"" + (t.path / "runs" / "sft" / "w.pt").string() + "\"") &&
                              Catch::Contains("--fresh"));
  // --fresh makes that start (and the run then starts from it).
  auto fresh = rlx_in(t.path, "sft --config cfg/tokens.toml --fresh --steps 1 --eval-tasks 1 --out runs/sft/w.pt");
  INFO(fresh.out);
  CHECK(fresh.status == 0);
  CHECK(fs::exists(t.path / "runs" / "sft" / "w.pt"));
  auto both = rlx_in(t.path, "sft --config cfg/tokens.toml --fresh --init w.pt --steps 1 --out x.pt");
  CHECK(both.status == 2);
  CHECK_THAT(both.out, Catch::Contains("--fresh and --init"));
}
