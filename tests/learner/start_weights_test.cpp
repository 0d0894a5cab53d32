// A start from a learner checkpoint (learner/start_weights.hpp): `[policy]
// init`, `rlx sft --init` and `rlx export --from` take a ckpt-N.bin or a
// run's log_dir (its newest) as they take an `rlx sft --out` file or
// hf:DIR. Only the weights come along, a policy of another shape or an
// MLP's checkpoint is refused naming why, and a damaged file is refused
// with the reason.
#include "learner/start_weights.hpp"

#include <filesystem>
#include <fstream>

#include "learner/checkpoint.hpp"
#include "learner/token_policy_trainer.hpp"
#include "tests/helpers.hpp"
#include "tests/torch_catch.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

TrainerOptions token_options() {
  const auto cfg = test::tiny_token_config();
  TrainerOptions o{cfg.learner, cfg.policy, 0, 0, 11};
  o.tokens = cfg.tokens;
  o.max_staleness = 4;
  return o;
}

MoETransformer& model_of(Trainer& t) { return dynamic_cast<TokenPolicyTrainer&>(t).tokens().model(); }

// A learner at `version` whose weights are its seed's moved by `shift`, checkpointed in `dir`.
fs::path checkpointed(const fs::path& dir, std::uint64_t version, float shift, bool copy_head = false) {
  LearnerCoreOptions co;
  co.trainer = token_options();
  co.trainer.policy.copy_head = copy_head;
  co.max_staleness = 4;
  co.batch_segments = 2;
  LearnerCore core(co);
  {
    torch::NoGradGuard guard;
    for (auto& p : model_of(core.trainer())->parameters()) p.add_(shift);
  }
  core.trainer().set_version(version);
  auto file = save_checkpoint(core, dir, 4);
  REQUIRE(file.ok());
  return *file;
}

bool same_weights(MoETransformer& a, MoETransformer& b) {
  auto x = a->named_parameters(true), y = b->named_parameters(true);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i].key() != y[i].key() || !torch::equal(x[i].value(), y[i].value())) return false;
  return true;
}

}  // namespace

TEST_CASE("a policy starts from a learner checkpoint's weights, named as a file or as its run's log_dir",
          "[learner][checkpoint][init]") {
  const test::TempDir t("rlx-start-ckpt");
  const auto older = checkpointed(t.path / "run" / "checkpoints", 7, 0.125f);
  const auto newer = checkpointed(t.path / "run" / "checkpoints", 42, 0.25f);
  LearnerCoreOptions co;
  co.trainer = token_options();
  co.max_staleness = 4;
  // What init names, and the checkpoint whose weights it should start from.
  const std::vector<std::pair<std::string, fs::path>> starts = {
      {older.string(), older}, {newer.string(), newer}, {(t.path / "run").string(), newer}};
  for (const auto& [init, file] : starts) {
    INFO(init);
    auto saved = load_checkpoint(file, co);
    REQUIRE(saved.ok());
    MoETransformer& want = model_of(saved->core->trainer());
    auto o = token_options();
    o.seed = 3;
    CHECK_FALSE(same_weights(model_of(*make_trainer(o)), want));  // another seed's weights until the start is read
    o.policy.init = init;
    REQUIRE(check_policy_init(o.policy, o.tokens).ok());
    auto started = make_trainer(o);
    CHECK(same_weights(model_of(*started), want));
    CHECK(started->version() == 0);  // only the weights: the run's own versions start afresh
    auto model = make_seeded_transformer(want->options(), 5);
    auto what = load_start_weights(model, init);
    REQUIRE(what.ok());
    CHECK(same_weights(model, want));
    CHECK(*what ==
          "learner checkpoint " + file.string() + ", version " + std::to_string(saved->core->trainer().version()));
  }
}

TEST_CASE(
    "a learner checkpoint of another shape, an MLP's, a damaged one or an empty folder is refused with the reason",
    "[learner][checkpoint][init]") {
  const test::TempDir t("rlx-start-refused");
  const auto file = checkpointed(t.path / "run" / "checkpoints", 3, 0.5f);
  auto wide = token_options();
  wide.policy.d_model = 64;
  wide.policy.init = file.string();
  auto shape = check_policy_init(wide.policy, wide.tokens);
  REQUIRE_FALSE(shape.ok());
  CHECK_THAT(shape.error().message, Catch::Contains("not weights of this policy shape"));
  // Both shapes named: the checkpoint's and this policy's.
  CHECK_THAT(shape.error().message, Catch::Contains("tok_emb.weight is [99, 32], this policy's [99, 64]"));

  LearnerCoreOptions mlp;
  mlp.trainer = TrainerOptions{test::default_config().learner, test::default_config().policy, 4, 2, 3};
  mlp.max_staleness = 4;
  mlp.batch_segments = 2;
  LearnerCore mlp_core(mlp);
  auto mlp_file = save_checkpoint(mlp_core, t.path / "mlp", 2);
  REQUIRE(mlp_file.ok());
  auto o = token_options();
  o.policy.init = mlp_file->string();
  auto not_tokens = check_policy_init(o.policy, o.tokens);
  REQUIRE_FALSE(not_tokens.ok());
  CHECK_THAT(not_tokens.error().message, Catch::Contains("not weights of this policy shape"));

  std::vector<char> bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  o.policy.init = (t.path / "run").string();
  auto damaged = check_policy_init(o.policy, o.tokens);
  REQUIRE_FALSE(damaged.ok());
  CHECK_THAT(damaged.error().message, Catch::Contains("checksum mismatch"));

  fs::create_directories(t.path / "empty");
  o.policy.init = (t.path / "empty").string();
  auto empty = check_policy_init(o.policy, o.tokens);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(empty.error().message, Catch::Contains("no learner checkpoint in"));
}

TEST_CASE("a learner checkpoint of a policy without a copy head starts one with it, whose head starts as built",
          "[learner][checkpoint][init][copy]") {
  const test::TempDir t("rlx-start-copy");
  const auto file = checkpointed(t.path / "run" / "checkpoints", 9, 0.5f);
  LearnerCoreOptions co;
  co.trainer = token_options();
  co.max_staleness = 4;
  auto saved = load_checkpoint(file, co);
  REQUIRE(saved.ok());
  MoETransformer& want = model_of(saved->core->trainer());
  auto shape = want->options();
  shape.copy_head = true;
  auto model = make_seeded_transformer(shape, 5);
  const auto head = model->named_parameters(true)["copy.gate.bias"].clone();
  auto what = load_start_weights(model, file.string());
  REQUIRE(what.ok());
  CHECK(*what == "learner checkpoint " + file.string() + ", version 9 (no copy head in it: the head starts fresh)");
  auto mine = model->named_parameters(true);
  for (const auto& p : want->named_parameters(true)) CHECK(torch::equal(mine[p.key()], p.value()));
  CHECK(torch::equal(mine["copy.gate.bias"], head));

  // The other way: a checkpoint with a head is refused by a policy without one, not cut down silently.
  const auto with_head = checkpointed(t.path / "copying" / "checkpoints", 10, 0.5f, /*copy_head=*/true);
  auto plain = make_seeded_transformer(want->options(), 6);
  auto refused = load_start_weights(plain, with_head.string());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("copy_head = true"));
}
