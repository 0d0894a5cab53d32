// A whole token run held in bf16, with and without LoRA adapters over a
// frozen base read from a Hugging Face checkpoint: it trains, accounts
// for every segment, its checkpoints hold what it trains (adapters and
// value head alone with LoRA), `rlx replay` reproduces every published
// (bf16) version bit for bit, and a resumed run goes on from its checkpoint.
#include "tests/torch_catch.hpp"

#include <filesystem>

#include "assembly/cluster.hpp"
#include "learner/checkpoint.hpp"
#include "policy/hf_checkpoint.hpp"
#include "tests/actors/token_toml.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

// A Qwen3-MoE of the arithmetic tokenizer's 99 ids, written to `dir`.
std::int64_t write_checkpoint(const fs::path& dir) {
  auto o = test::hf_small(HfFamily::qwen3_moe);
  o.vocab = 99;
  o.layers = 1;
  o.max_len = 24;
  auto model = make_seeded_transformer(o, 3);
  REQUIRE(export_hf(model, dir.string()).ok());
  std::int64_t n = 0;
  for (const auto& [name, t] : model->hf_tensors()) n += t.numel();
  return n;
}

}  // namespace

TEST_CASE("a bf16 token run, whole or LoRA, trains, checkpoints what it trains, replays exactly and resumes",
          "[actors][bf16][lora][e2e][slow]") {
  for (const bool lora : {false, true}) {
    DYNAMIC_SECTION((lora ? "LoRA" : "every weight")) {
      const test::TempDir t(lora ? "rlx-lora-run" : "rlx-bf16-run");
      const auto params = write_checkpoint(t.path / "base");
      const auto log = t.path / "log";
      const std::string policy = "max_len = 24\ninit = \"hf:" + (t.path / "base").string() + "\"\ndtype = \"bf16\"\n" +
                                 (lora ? "lora = { rank = 4, targets = [\"q_proj\", \"v_proj\", \"experts\"] }\n" : "");
      auto cfg = test::token_config("tokens:arithmetic", log, policy + R"(
[tokens]
group_size = 4
max_new_tokens = 4
eval_tasks = 0
)",
                                    "explorers = 1\nenvs_per_explorer = 8\nrewards = 0\n");
      cfg.learner.algorithm =
          Algorithm::ppo;  // the value loss trains every update (a GRPO group of equal rewards does not)
      RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
      INFO(r.summary);
      CHECK(r.outcome == RunOutcome::budget);
      const auto line = test::last_metrics_line(log);
      INFO(line);
      test::check_segment_identity(line);
      CHECK(test::json_number(line, "segments_lost") == 0);
      CHECK(test::json_number(line, "policy_version") >= 3);
      CHECK(test::json_number(line, "value_loss") > 0);
      // A checkpoint holds each trained parameter with Adam's two moments
      // in fp32: with LoRA a few percent of the model.
      const auto checkpoints = list_checkpoints(log / "checkpoints");
      REQUIRE_FALSE(checkpoints.empty());
      const auto bytes = static_cast<double>(fs::file_size(checkpoints.front()));
      INFO("checkpoint " << bytes << " bytes, the model " << params << " parameters");
      if (lora)
        CHECK(bytes < 0.5 * 12.0 * static_cast<double>(params));
      else
        CHECK(bytes > 12.0 * static_cast<double>(params));
      const auto replayed = test::run_command(std::string(RLX_BINARY) + " replay " + log.string());
      INFO(replayed.out);
      CHECK(replayed.status == 0);
      CHECK(replayed.out.find("identical") != std::string::npos);
      // Resumed from its end checkpoint, it goes on, and the whole log replays exactly.
      const auto first_version = test::json_number(line, "policy_version");
      cfg.run.stop.max_env_steps = 4000;
      RunOptions resume;
      resume.resume = true;
      RunResult again = run_cluster(cfg, builtin_envs(), {}, null_logger(), resume);
      INFO(again.summary);
      CHECK(again.outcome == RunOutcome::budget);
      CHECK(test::json_number(test::last_metrics_line(log), "policy_version") > first_version);
      const auto whole = test::run_command(std::string(RLX_BINARY) + " replay " + log.string());
      INFO(whole.out);
      CHECK(whole.status == 0);
      CHECK(whole.out.find("identical") != std::string::npos);
    }
  }
}
