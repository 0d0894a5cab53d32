#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "tests/helpers.hpp"

using namespace rlx;

namespace {
std::string valid_nodes() {
  return "\n[[node]]\nname = \"head\"\nactors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\n"
         "explorers = 2\n";
}

// A refusal whose message names `key` (what a user must fix).
template <typename R>
bool refused_naming(const R& result, const std::string& key) {
  return !result.ok() && result.error().message.find(key) != std::string::npos;
}
}  // namespace

TEST_CASE("the embedded cluster.toml is valid and has the documented defaults", "[core][config]") {
  auto c = test::default_config();
  CHECK(c.run.env == "cartpole");
  CHECK(c.policy.kind == PolicyKind::moe_mlp);
  CHECK(c.total_explorers() >= 2);
  CHECK(c.run.max_staleness > 0);
}

TEST_CASE("a wrong type names the file, line, column, key and value", "[core][config]") {
  auto r = test::parse("[run]\nseed = 1\nmax_staleness = \"four\"\n" + valid_nodes());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::config_type);
  const auto& m = r.error().message;
  CHECK(m.find("test.toml:3:17") != std::string::npos);
  CHECK(m.find("run.max_staleness") != std::string::npos);
  CHECK(m.find("\"four\"") != std::string::npos);
  CHECK(m.find("expected an integer") != std::string::npos);
}

TEST_CASE("an unknown key is reported with what is known", "[core][config]") {
  auto r = test::parse("[learner]\nlearning_rate = 0.1\n" + valid_nodes());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::config_unknown_key);
  CHECK(r.error().message.find("test.toml:2:1") != std::string::npos);
  CHECK(r.error().message.find("learner.learning_rate") != std::string::npos);
  CHECK(r.error().message.find("lr") != std::string::npos);
  auto top = test::parse("[runn]\nseed = 1\n" + valid_nodes());
  REQUIRE_FALSE(top.ok());
  CHECK(top.error().code == Errc::config_unknown_key);
}

TEST_CASE("an out-of-range number names the allowed range", "[core][config]") {
  auto r = test::parse("[learner]\nlr = -0.5\n" + valid_nodes());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::config_range);
  CHECK(r.error().message.find("learner.lr") != std::string::npos);
  CHECK(r.error().message.find("-0.5") != std::string::npos);
  CHECK(r.error().message.find("(0, 10]") != std::string::npos);
  auto k = test::parse("[policy]\nexperts = 2\ntop_k = 3\n" + valid_nodes());
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().message.find("top_k <= experts") != std::string::npos);
}

TEST_CASE("an unknown env or policy name lists the registry", "[core][config]") {
  auto e = test::parse("[run]\nenv = \"cartpol\"\n" + valid_nodes());
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == Errc::config_unknown_name);
  CHECK(e.error().message.find("\"cartpol\"") != std::string::npos);
  CHECK(e.error().message.find("allowed: cartpole") != std::string::npos);
  auto p = test::parse("[policy]\nkind = \"dense\"\n" + valid_nodes());
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == Errc::config_unknown_name);
  CHECK(p.error().message.find("moe_mlp") != std::string::npos);
}

TEST_CASE("the off-policy correction is decoupled unless set, the main job sets none, and none is refused with V-trace",
          "[core][config]") {
  CHECK(LearnerConfig{}.correction == Correction::decoupled);
  auto unset = test::parse("[learner]\nlr = 1e-3\n" + valid_nodes());
  REQUIRE(unset.ok());
  CHECK(unset->learner.correction == Correction::decoupled);
  CHECK(test::default_config().learner.correction == Correction::none);  // measured better on CartPole
  auto none = test::parse("[learner]\ncorrection = \"none\"\n" + valid_nodes());
  REQUIRE(none.ok());
  CHECK(none->learner.correction == Correction::none);
  auto typo = test::parse("[learner]\ncorrection = \"off\"\n" + valid_nodes());
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().code == Errc::config_unknown_name);
  CHECK(typo.error().message.find("decoupled") != std::string::npos);
  auto vtrace = test::parse("[learner]\nalgorithm = \"vtrace\"\ncorrection = \"none\"\n" + valid_nodes());
  REQUIRE_FALSE(vtrace.ok());
  CHECK(vtrace.error().message.find("learner.correction") != std::string::npos);
  CHECK(vtrace.error().message.find("set it to \"decoupled\"") != std::string::npos);
}

TEST_CASE("a TOML syntax error names the line and column", "[core][config]") {
  auto r = test::parse("[run]\nseed = = 1\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::config_parse);
  CHECK(r.error().message.find("test.toml:2:") != std::string::npos);
}

TEST_CASE("a topology without a learner or explorers is refused", "[core][config]") {
  auto r = test::parse("[[node]]\nname = \"a\"\nactors = [\"coordinator\"]\nexplorers = 1\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("\"learner\"") != std::string::npos);
  auto s = test::parse("[run]\nmode = \"sync\"\n[learner]\nbatch_segments = 3\n" + valid_nodes());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("sync mode") != std::string::npos);
}

TEST_CASE("rlx launch exits 2 with the message on a bad config", "[core][config][tools]") {
  test::TempDir dir("rlx-bad-config");
  const std::string path = (dir.path / "rlx_bad_config_test.toml").string();
  const std::string err_path = (dir.path / "err.txt").string();
  std::ofstream(path) << "[run]\nmax_staleness = -3\n" << valid_nodes();
  const std::string cmd = std::string(RLX_BINARY) + " launch " + path + " 2> " + err_path;
  int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  std::ifstream err(err_path);
  std::string text((std::istreambuf_iterator<char>(err)), {});
  CHECK(text.find("rlx_bad_config_test.toml:2:17") != std::string::npos);
  CHECK(text.find("run.max_staleness") != std::string::npos);
}

TEST_CASE("an exec: env and its [external] table are validated", "[core][config][external]") {
  auto ok = test::parse("[run]\nenv = \"exec:python3 env.py\"\n[external]\nprotocol = \"capnp\"\ntimeout_s = 2\n"
                        "args = [\"--name\", \"a b\"]\n"
                        "env = { MODE = \"fast\" }\n" + valid_nodes());
  REQUIRE(ok.ok());
  CHECK(ok->external.protocol == EnvProtocol::capnp);
  CHECK(ok->external.timeout_s == 2.0);
  CHECK((ok->external.env == std::vector<std::string>{"MODE=fast"}));
  CHECK((ok->external.args == std::vector<std::string>{"--name", "a b"}));
  auto empty = test::parse("[run]\nenv = \"exec: \"\n" + valid_nodes());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message.find("needs a command") != std::string::npos);
  auto proto = test::parse("[external]\nprotocol = \"xml\"\n" + valid_nodes());
  REQUIRE_FALSE(proto.ok());
  CHECK(proto.error().message.find("allowed: json, capnp") != std::string::npos);
  auto unknown_name = test::parse("[run]\nenv = \"pong\"\n" + valid_nodes());
  REQUIRE_FALSE(unknown_name.ok());
  CHECK(unknown_name.error().message.find("exec:COMMAND") != std::string::npos);
}

TEST_CASE("the [record] table is parsed and validated", "[core][config][replay]") {
  auto ok = test::parse("[record]\nfile_mb = 8\ncompress = \"zstd\"\ncompress_level = 5\n" + valid_nodes());
  REQUIRE(ok.ok());
  CHECK(ok->record.file_mb == 8);
  CHECK(ok->record.compress == "zstd");
  CHECK(ok->record.compress_level == 5);
  auto bad = test::parse("[record]\ncompress = \"gzip\"\n" + valid_nodes());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("record.compress") != std::string::npos);
  CHECK(bad.error().message.find("zstd") != std::string::npos);
  auto zero = test::parse("[record]\nfile_mb = 0\n" + valid_nodes());
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().code == Errc::config_range);
}

TEST_CASE("heartbeat, eviction and reconnect times are parsed, and eviction faster than two heartbeats is refused",
          "[core][config][cluster]") {
  auto ok = test::parse("[launch]\nheartbeat_s = 0.5\nevict_after_s = 4\n[weight_store]\nbulk = false\n" + valid_nodes());
  REQUIRE(ok.ok());
  CHECK(ok->launch.heartbeat_s == 0.5);
  CHECK(ok->launch.evict_after_s == 4.0);
  CHECK_FALSE(ok->weight_store.bulk);
  auto fast = test::parse("[launch]\nheartbeat_s = 2\nevict_after_s = 3\n" + valid_nodes());
  REQUIRE_FALSE(fast.ok());
  CHECK(fast.error().code == Errc::config_range);
  CHECK(fast.error().message.find("at least twice heartbeat_s") != std::string::npos);
  auto zero = test::parse("[launch]\nheartbeat_s = 0\n" + valid_nodes());
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("launch.heartbeat_s") != std::string::npos);
  CHECK(ok->launch.reconnect_s == 60.0);
  auto wait = test::parse("[launch]\nreconnect_s = 0\n" + valid_nodes());
  REQUIRE(wait.ok());
  CHECK(wait->launch.reconnect_s == 0.0);  // 0: a node exits as soon as the head goes
  CHECK(ok->reward.scorer == "arithmetic");
  auto code = test::parse("[reward]\nscorer = \"code\"\n" + valid_nodes());
  REQUIRE(code.ok());
  CHECK(code->reward.scorer == "code");
  auto unknown = test::parse("[reward]\nscorer = \"llm-judge\"\n" + valid_nodes());
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("reward.scorer") != std::string::npos);
  auto negative = test::parse("[launch]\nreconnect_s = -1\n" + valid_nodes());
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().message.find("launch.reconnect_s") != std::string::npos);
}

TEST_CASE("[autoscale] and [launch] listen are parsed, and a max below the min or autoscaling a sync run is refused",
          "[core][config][autoscale]") {
  auto ok = test::parse("[launch]\nlisten = true\n[autoscale]\nenabled = true\nmin_explorers = 2\nmax_explorers = 6\n"
                        "interval_s = 5\nidle_above = 0.4\nstale_above = 0.2\n" +
                        valid_nodes());
  REQUIRE(ok.ok());
  CHECK(ok->launch.listen);
  CHECK(ok->autoscale.enabled);
  CHECK(ok->autoscale.min_explorers == 2);
  CHECK(ok->autoscale.max_explorers == 6);
  CHECK(ok->autoscale.interval_s == 5.0);
  CHECK(ok->autoscale.idle_above == 0.4);
  CHECK(ok->autoscale.stale_above == 0.2);
  auto inverted = test::parse("[autoscale]\nmin_explorers = 5\nmax_explorers = 2\n" + valid_nodes());
  REQUIRE_FALSE(inverted.ok());
  CHECK(inverted.error().message.find("at least min_explorers") != std::string::npos);
  auto fraction = test::parse("[autoscale]\nidle_above = 1.5\n" + valid_nodes());
  REQUIRE_FALSE(fraction.ok());
  CHECK(fraction.error().code == Errc::config_range);
  auto typo = test::parse("[autoscale]\nmax_explorer = 3\n" + valid_nodes());
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().code == Errc::config_unknown_key);
  auto sync = test::parse("[run]\nmode = \"sync\"\n[autoscale]\nenabled = true\n" + valid_nodes());
  REQUIRE_FALSE(sync.ok());
  CHECK(sync.error().message.find("autoscaling is for async runs") != std::string::npos);
}

TEST_CASE("a configuration written back as TOML parses to the same configuration", "[core][config]") {
  auto c = test::default_config();
  c.run.seed = 77;
  c.learner.ranks = 3;
  c.learner.device = "cuda:1";
  c.learner.collectives = Collectives::nccl;
  c.learner.lr = 0.00125;
  c.record.compress = "zstd";
  c.external.args = {"--level", "two words"};
  c.external.env = {"A=1", "B=x=y"};
  c.run.env = "exec:python3 env.py";
  c.autoscale.enabled = true;
  c.autoscale.max_explorers = 12;
  c.launch.listen = true;
  c.run.stop.max_updates = 40;
  const std::string text = to_toml(c);
  auto back = test::parse(text);
  INFO(text);
  REQUIRE(back.ok());
  CHECK(to_toml(*back) == text);
  CHECK(back->run.seed == 77);
  CHECK(back->learner.ranks == 3);
  CHECK(back->learner.collectives == Collectives::nccl);
  CHECK(back->learner.lr == 0.00125);
  CHECK(back->external.env == c.external.env);
  CHECK(back->external.args == c.external.args);
  CHECK(back->autoscale.max_explorers == 12);
  CHECK(back->launch.listen);
  CHECK(back->run.stop.max_updates == 40);
  CHECK(back->nodes.size() == c.nodes.size());
}

TEST_CASE("a token run needs the token policy, a dividing group, room for its prompts and a CPU learner", "[config][token]") {
  const std::string base = R"(
[run]
env = "tokens:arithmetic"
[policy]
kind = "moe_transformer"
[learner]
algorithm = "grpo"
[[node]]
name = "head"
actors = ["coordinator", "learner", "weight_store", "recorder"]
explorers = 1
envs_per_explorer = 16
)";
  CHECK(test::parse(base).ok());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return test::parse(t);
  };
  auto mlp = with("kind = \"moe_transformer\"", "kind = \"moe_mlp\"");
  REQUIRE_FALSE(mlp.ok());
  CHECK(mlp.error().message.find("moe_transformer") != std::string::npos);
  auto cartpole = with("env = \"tokens:arithmetic\"", "env = \"cartpole\"");
  REQUIRE_FALSE(cartpole.ok());
  CHECK(cartpole.error().message.find("token env") != std::string::npos);
  auto group = with("[learner]", "[tokens]\ngroup_size = 5\n[learner]");
  REQUIRE_FALSE(group.ok());
  CHECK(group.error().message.find("group_size") != std::string::npos);
  auto vtrace = with("algorithm = \"grpo\"", "algorithm = \"vtrace\"");
  CHECK_FALSE(vtrace.ok());
  auto long_answers = with("[learner]", "[tokens]\nmax_new_tokens = 300\n[learner]");
  CHECK_FALSE(long_answers.ok());
  CHECK(refused_naming(with("env = \"tokens:arithmetic\"", "env = \"tokens:code\""), "scorer"));
  CHECK(refused_naming(with("[learner]", "[reward]\nscorer = \"workspace\"\n[learner]"), "workspace"));
  auto unknown = with("env = \"tokens:arithmetic\"", "env = \"tokens:chess\"");
  CHECK_FALSE(unknown.ok());
  auto hints = with("[learner]", "[tokens]\nhint_coef = 0.25\n[learner]");
  REQUIRE(hints.ok());
  CHECK(hints->tokens.hint_coef == 0.25);
  CHECK(refused_naming(with("[learner]", "[tokens]\nhint_coef = -1.0\n[learner]"), "hint_coef"));
  // Names in edits from the context: a workspace episode's rule, and one of two values.
  CHECK(refused_naming(with("[learner]", "[tokens]\nedit_names = \"context\"\n[learner]"), "edit_names"));
  CHECK(refused_naming(with("[learner]", "[tokens]\nedit_names = \"maybe\"\n[learner]"), "edit_names"));
  CHECK(with("[learner]", "[tokens]\nedit_names = \"free\"\n[learner]").ok());
  // A cost on refused calls: workspace episodes only (tool calls to refuse).
  CHECK(refused_naming(with("[learner]", "[tokens]\nbad_call_cost = 0.05\n[learner]"), "bad_call_cost"));
  CHECK(with("[learner]", "[tokens]\nbad_call_cost = 0.0\n[learner]").ok());
  auto anchored = with("[learner]", "[learner]\nkl_coef = 0.05");
  REQUIRE(anchored.ok());
  CHECK(anchored->learner.kl_coef == 0.05);
  CHECK(refused_naming(with("[learner]", "[learner]\nkl_coef = -0.1"), "kl_coef"));
  // bf16 at rest: two values, and not with a copy head (it computes in fp32).
  const auto policy_with = [&](const std::string& keys) {
    return with("kind = \"moe_transformer\"", "kind = \"moe_transformer\"\n" + keys);
  };
  auto bf16 = policy_with("dtype = \"bf16\"");
  REQUIRE(bf16.ok());
  CHECK(bf16->policy.dtype == WeightDType::bf16);
  CHECK(refused_naming(policy_with("dtype = \"f16\""), "bf16"));
  CHECK(refused_naming(policy_with("dtype = \"bf16\"\ncopy_head = true"), "copy head"));
  // LoRA: adapters over a Hugging Face start, on targets named as PEFT names them.
  auto lora = policy_with("init = \"hf:m\"\n[policy.lora]\nrank = 8\nalpha = 32\ntargets = [\"q_proj\", \"experts\"]");
  REQUIRE(lora.ok());
  CHECK(lora->policy.lora.rank == 8);
  CHECK(lora->policy.lora.alpha == 32.0);
  CHECK(lora->policy.lora.targets == std::vector<std::string>{"q_proj", "experts"});
  CHECK_FALSE(lora->policy.lora.router);
  CHECK(policy_with("init = \"hf:m\"\nlora = { rank = 4 }").ok());
  CHECK(refused_naming(policy_with("lora = { rank = 4 }"), "hf:DIR"));
  CHECK(refused_naming(policy_with("init = \"hf:m\"\nlora = { rank = 4, targets = [\"attn\"] }"), "attn"));
  CHECK(refused_naming(policy_with("init = \"hf:m\"\nlora = { rank = 4, targets = [] }"), "targets"));
  CHECK(refused_naming(policy_with("init = \"hf:m\"\nlora = { rank = -1 }"), "rank"));
  CHECK(refused_naming(policy_with("init = \"hf:m\"\nlora = { rank = 4, alpha = 0.0 }"), "alpha"));
  auto warm = with("[learner]", "[learner]\nwarmup_updates = 10");
  REQUIRE(warm.ok());
  CHECK(warm->learner.warmup_updates == 10);
  CHECK(refused_naming(with("[learner]", "[learner]\nwarmup_updates = -1"), "warmup_updates"));
  // Its learner may train on a GPU and on several ranks (the build and
  // the machine are checked at start, check_device).
  auto gpu = with("[learner]", "[learner]\ndevice = \"cuda\"\nranks = 2");
  REQUIRE(gpu.ok());
  CHECK(gpu->learner.device == "cuda");
  CHECK(gpu->learner.ranks == 2);
}

TEST_CASE("grpo is refused for a policy that does not sample groups", "[config][token]") {
  auto c = test::parse("[learner]\nalgorithm = \"grpo\"\n" + valid_nodes());
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find("grpo") != std::string::npos);
  CHECK(refused_naming(test::parse("[learner]\nkl_coef = 0.1\n" + valid_nodes()), "learner.kl_coef"));
  CHECK(refused_naming(test::parse("[policy]\ndtype = \"bf16\"\n" + valid_nodes()), "policy.dtype"));
  CHECK(refused_naming(test::parse("[policy.lora]\nrank = 4\n" + valid_nodes()), "policy.lora.rank"));
}

TEST_CASE("the learner's collectives are auto, gloo or nccl, and nccl needs a GPU device", "[core][config][dp]") {
  auto with = [](const std::string& learner) {
    return test::parse("[learner]\n" + learner + "\n" + valid_nodes());
  };
  auto plain = with("ranks = 2");
  REQUIRE(plain.ok());
  CHECK(plain->learner.collectives == Collectives::automatic);
  CHECK(with("ranks = 2\ncollectives = \"gloo\"").ok());
  CHECK(with("ranks = 2\ndevice = \"cuda\"\ncollectives = \"nccl\"").ok());  // the build is checked at start
  auto cpu = with("ranks = 2\ncollectives = \"nccl\"");
  CHECK(refused_naming(cpu, "learner.collectives"));
  CHECK(refused_naming(cpu, "needs device"));
  CHECK(refused_naming(with("collectives = \"mpi\""), "learner.collectives"));
}

TEST_CASE("learner ranks placed on nodes must add up to the ranks beside rank 0, and not on Slurm nodes",
          "[core][config][dp]") {
  auto topology = [](int ranks, int on_a, const std::string& launcher) {
    return test::parse("[learner]\nranks = " + std::to_string(ranks) + "\n" + valid_nodes() +
                       "\n[[node]]\nname = \"a\"\nhost = \"10.0.0.2\"\nexplorers = 1\nlauncher = \"" + launcher +
                       "\"\nlearner_ranks = " + std::to_string(on_a) + "\n");
  };
  auto placed = topology(3, 2, "ssh");
  REQUIRE(placed.ok());
  CHECK(placed->nodes[1].learner_ranks == 2);
  CHECK(topology(3, 0, "ssh").ok());  // none placed: all on the head
  auto short_by_one = topology(4, 2, "ssh");
  CHECK(refused_naming(short_by_one, "learner_ranks"));
  CHECK(refused_naming(short_by_one, "add up to 2"));
  CHECK(refused_naming(topology(2, 2, "local"), "learner_ranks"));
  CHECK(refused_naming(topology(2, 1, "slurm"), "Slurm"));
  // Written back and read again, the placement stays.
  auto back = test::parse(to_toml(*placed));
  REQUIRE(back.ok());
  CHECK(back->nodes[1].learner_ranks == 2);
}

TEST_CASE("a config's tokenizer and start weights named by relative paths are found beside the config",
          "[core][config]") {
  test::TempDir t("rlx-config-beside");
  std::filesystem::create_directories(t.path / "cfg");
  const auto write = [&](const std::string& policy_init, const std::string& tokenizer) {
    std::ofstream(t.path / "cfg" / "c.toml")
        << "[run]\nenv = \"tokens:arithmetic\"\n[policy]\nkind = \"moe_transformer\"\n" << policy_init << "\n[tokens]\n"
        << tokenizer << "\n[learner]\nalgorithm = \"grpo\"\n" << valid_nodes() << "envs_per_explorer = 16\n";
    return load_config((t.path / "cfg" / "c.toml").string(), builtin_envs().names());
  };
  const auto folder = (t.path / "cfg").lexically_normal();
  auto rel = write("init = \"starts/w.bin\"", "tokenizer = \"../v.vocab\"");
  REQUIRE(rel.ok());
  CHECK(rel->policy.init == (folder / "starts" / "w.bin").string());
  CHECK(rel->tokens.tokenizer == (t.path / "v.vocab").lexically_normal().string());
  // A Hugging Face folder the same way; absolute paths stay as written.
  auto hf = write("init = \"hf:model\"", "tokenizer = \"/abs/v.vocab\"");
  REQUIRE(hf.ok());
  CHECK(hf->policy.init == "hf:" + (folder / "model").string());
  CHECK(hf->tokens.tokenizer == "/abs/v.vocab");
  auto abs = write("init = \"/abs/w.bin\"", "");
  REQUIRE(abs.ok());
  CHECK(abs->policy.init == "/abs/w.bin");
}
