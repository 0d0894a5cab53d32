// A run started from a Hugging Face checkpoint (issue 26): `[policy] init
// = "hf:DIR"` gives the policy the checkpoint's shape and weights (a
// vocabulary it cannot hold refused), `rlx init-model --hf` writes a
// fresh one, `rlx sft --out hf:DIR` and `rlx export --hf` write the
// trained policy back bit-exact (from a weights file, hf:DIR, or a
// learner checkpoint in a log_dir), an export writes one shard at a time
// and leaves no stale weights behind, and a mapped tensor's pages handed
// back read the same values again.
#include "tests/torch_catch.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "assembly/component_options.hpp"
#include "core/config.hpp"
#include "envs/env.hpp"
#include "learner/checkpoint.hpp"
#include "learner/token_policy_trainer.hpp"
#include "policy/hf_checkpoint.hpp"
#include "tests/helpers.hpp"
#include "tools/hf_cmd.hpp"
#include "tools/sft_cmd.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

const std::string kTokenizer = std::string(RLX_SOURCE_DIR) + "/examples/hf-moe-tokenizer.json";

InitModelArgs small_model(const fs::path& dir) {
  InitModelArgs a;
  a.dir = dir.string();
  a.tokenizer = kTokenizer;
  a.d_model = 32;
  a.layers = 2;
  a.heads = 4;
  a.kv_heads = 2;
  a.experts = 4;
  a.top_k = 2;
  a.expert_hidden = 24;
  a.seed = 5;
  return a;
}

// Every tensor of two checkpoints, byte for byte.
void require_same_weights(const fs::path& a, const fs::path& b) {
  auto x = SafetensorsCheckpoint::open(a.string()), y = SafetensorsCheckpoint::open(b.string());
  REQUIRE((x.ok() && y.ok()));
  REQUIRE(x->names() == y->names());
  for (const auto& name : x->names()) {
    const auto* s = x->find(name);
    const auto* t = y->find(name);
    INFO(name);
    REQUIRE(s->bytes == t->bytes);
    CHECK(std::memcmp(s->data, t->data, s->bytes) == 0);
  }
}

std::string run_config(const fs::path& dir, const std::string& init, const std::string& env = "tokens:arithmetic") {
  const auto file = dir / "run.toml";
  std::ofstream(file) << "[run]\nenv = \"" << env << "\"\nlog_dir = \"" << (dir / "log").string()
                      << "\"\n[policy]\nkind = \"moe_transformer\"\nmax_len = 64\ninit = \"" << init
                      << "\"\n[tokens]\ntokenizer = \"" << kTokenizer << "\"\nmax_new_tokens = 8\n[learner]\nalgorithm = \"grpo\"\n"
                      << "[[node]]\nname = \"head\"\nhost = \"127.0.0.1\"\nactors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\nexplorers = 1\n";
  return file.string();
}

}  // namespace

TEST_CASE("a run's policy takes the shape and weights of the checkpoint its init names, and a vocabulary it cannot hold is refused",
          "[policy][hf]") {
  const test::TempDir t("rlx-hf-init");
  REQUIRE(init_model_command(small_model(t.path / "m")) == 0);
  CHECK(fs::exists(t.path / "m" / "tokenizer.json"));
  PolicyConfig p;
  p.kind = PolicyKind::moe_transformer;
  p.init = "hf:" + (t.path / "m").string();
  p.max_len = 48;
  p.layers = 7;  // not read: the checkpoint's config.json says
  auto o = policy_transformer_options(p, 1024);
  INFO((o ? std::string() : o.error().message));
  REQUIRE(o.ok());
  CHECK(o->arch == TransformerArch::hf);
  CHECK(o->layers == 2);
  CHECK(o->d_model == 32);
  CHECK(o->kv_heads == 2);
  CHECK(o->max_len == 48);
  auto model = make_seeded_transformer(*o, 1);
  REQUIRE(load_policy_init(model, p.init).ok());
  auto fresh = load_hf_transformer((t.path / "m").string(), 48, 2);
  REQUIRE(fresh.ok());
  torch::NoGradGuard guard;
  const auto tokens = torch::tensor({{3, 500, 17, 1000}}, torch::kLong);
  const auto valid = torch::ones_like(tokens, torch::kBool);
  CHECK(torch::equal(model->forward(tokens, valid).logits, (*fresh)->forward(tokens, valid).logits));
  auto small = policy_transformer_options(p, 5000);
  REQUIRE_FALSE(small.ok());
  CHECK_THAT(small.error().message, Catch::Contains("vocab_size 1024 is smaller than the tokenizer's 5000"));
  p.init = "hf:" + (t.path / "none").string();
  auto missing = policy_transformer_options(p, 1024);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("config.json"));
}

TEST_CASE("an export over an earlier one with other shards leaves only the new weights, which load back equal",
          "[policy][hf]") {
  const test::TempDir t("rlx-hf-reexport");
  auto a = small_model(t.path / "m");
  REQUIRE(init_model_command(a) == 0);
  auto model = load_hf_transformer(a.dir, 64, 1);
  REQUIRE(model.ok());
  const auto out = t.path / "out";
  const auto weights_files = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(out))
      if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json")
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  REQUIRE(export_hf(*model, out.string(), StDtype::f32, 64 * 1024).ok());
  const auto sharded = weights_files();
  CHECK(sharded.size() >= 3);  // an index and two shards or more
  REQUIRE(export_hf(*model, out.string()).ok());
  CHECK(weights_files() == std::vector<std::string>{"model.safetensors"});
  require_same_weights(a.dir, out);
  REQUIRE(export_hf(*model, out.string(), StDtype::f32, 64 * 1024).ok());
  CHECK(weights_files() == sharded);
  require_same_weights(a.dir, out);
}

TEST_CASE("a mapped tensor whose pages were handed back reads the same values again", "[policy][hf]") {
  const test::TempDir t("rlx-st-release");
  std::vector<float> values(300000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const auto file = (t.path / "x.safetensors").string();
  REQUIRE(write_safetensors(file, {{"x", StDtype::f32, {300000}, values.data(), values.size() * 4}}).ok());
  auto f = SafetensorsFile::open(file);
  REQUIRE(f.ok());
  const auto& x = f->tensors().at(0);
  CHECK(x.mapped);
  REQUIRE(*st_to_f32(x) == values);
  st_release(x);
  CHECK(*st_to_f32(x) == values);
}

TEST_CASE("rlx sft writes a Hugging Face checkpoint that rlx export writes back bit-exact, and a learner checkpoint exports "
          "its own weights",
          "[policy][hf][cli]") {
  const test::TempDir t("rlx-hf-cli");
  REQUIRE(init_model_command(small_model(t.path / "init")) == 0);
  SftArgs s;
  s.kind = "arithmetic";
  s.config = run_config(t.path, "hf:" + (t.path / "init").string());
  s.steps = 3;
  s.batch = 4;
  s.eval_every = 0;
  s.eval_tasks = 2;
  s.threads = 1;
  s.out = "hf:" + (t.path / "sft").string();
  REQUIRE(sft_command(s) == 0);
  CHECK(fs::exists(t.path / "sft" / "tokenizer.json"));
  // Trained: not the initial weights.
  auto init = SafetensorsCheckpoint::open((t.path / "init").string()), sft = SafetensorsCheckpoint::open((t.path / "sft").string());
  REQUIRE((init.ok() && sft.ok()));
  const auto* w0 = init->find("model.layers.0.self_attn.q_proj.weight");
  const auto* w1 = sft->find("model.layers.0.self_attn.q_proj.weight");
  REQUIRE((w0 && w1));
  CHECK(std::memcmp(w0->data, w1->data, w0->bytes) != 0);

  ExportArgs e;
  e.config = run_config(t.path, "hf:" + (t.path / "sft").string());
  e.from = "hf:" + (t.path / "sft").string();
  e.dir = (t.path / "again").string();
  REQUIRE(export_command(e) == 0);
  require_same_weights(t.path / "sft", t.path / "again");
  CHECK(fs::exists(t.path / "again" / "tokenizer.json"));

  // A learner checkpoint in the run's log_dir: its weights, not the init's.
  auto config = load_config(e.config, builtin_envs().names());
  REQUIRE(config.ok());
  LearnerCore core(learner_core_options(*config, EnvSpec{}));
  auto* trainer = dynamic_cast<TokenPolicyTrainer*>(&core.trainer());
  REQUIRE(trainer != nullptr);
  {
    torch::NoGradGuard guard;
    for (auto& [name, w] : trainer->tokens().model()->hf_tensors())
      if (name == "model.norm.weight") w.add_(0.25);
  }
  REQUIRE(save_checkpoint(core, t.path / "log" / "checkpoints", 2).ok());
  e.from.clear();  // the config's log_dir
  e.dir = (t.path / "from-ckpt").string();
  REQUIRE(export_command(e) == 0);
  auto back = SafetensorsCheckpoint::open(e.dir);
  REQUIRE(back.ok());
  const auto* norm = back->find("model.norm.weight");
  const auto* norm0 = sft->find("model.norm.weight");
  REQUIRE((norm && norm0));
  const auto got = *st_to_f32(*norm), was = *st_to_f32(*norm0);
  REQUIRE(got.size() == was.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == was[i] + 0.25f);
}
