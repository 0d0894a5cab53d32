// LoRA ([policy.lora]): a fresh adapter computes its base's function; only
// adapters and the value head are parameters (in the optimizer, in a weight
// set); every LoRA model of a process views one frozen base; the merged
// export gives the unmerged policy's logits; a PEFT export names tensors
// as PEFT does, reads back equal, and a mismatched one is refused by name.
#include "tests/torch_catch.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safetensors.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/lora_base.hpp"
#include "policy/peft_adapter.hpp"
#include "policy/weights_io.hpp"
#include "tests/helpers.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

// A Qwen3-MoE-shaped model with a dense first layer: every LoRA target exists.
TransformerOptions lora_mixed_small() {
  auto o = test::hf_small(HfFamily::qwen3_moe);
  o.mlp_hidden = 40;
  o.mlp_only_layers = {0};
  return o;
}

TransformerOptions with_lora(TransformerOptions o, const fs::path& base, std::int64_t rank = 4) {
  o.lora.rank = rank;
  o.lora.alpha = 8;
  o.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "experts", "lm_head"};
  o.lora_base = base.string();
  return o;
}

// A checkpoint of lora_mixed_small() drawn from seed 5, in `dir`.
void write_base(const fs::path& dir) {
  auto model = make_seeded_transformer(lora_mixed_small(), 5);
  REQUIRE(export_hf(model, dir.string()).ok());
}

std::pair<torch::Tensor, torch::Tensor> rows() {
  torch::manual_seed(11);
  auto tokens = torch::randint(40, {2, 9}, torch::kLong);
  auto valid = torch::ones({2, 9}, torch::kBool);
  valid[1].narrow(0, 0, 3).fill_(false);
  return {tokens, valid};
}

// Every adapter's B drawn (a fresh one is zero, and changes nothing).
void draw_adapters(MoETransformer& model) {
  torch::NoGradGuard guard;
  torch::manual_seed(3);
  for (auto& p : model->named_parameters(true))
    if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.2);
}

// A learner's LoRA policy over a base written to dir/base, its adapters drawn.
MoETransformer drawn_lora(const fs::path& dir) {
  write_base(dir / "base");
  auto model = make_trainable_transformer(with_lora(lora_mixed_small(), dir / "base"), 1, true);
  draw_adapters(model);
  return model;
}

}  // namespace

TEST_CASE("a fresh LoRA policy computes its base's function, and only its adapters and value head are parameters",
          "[policy][lora]") {
  const test::TempDir t("rlx-lora-fresh");
  write_base(t.path / "base");
  auto base = load_hf_transformer((t.path / "base").string(), 48, 1);
  REQUIRE(base.ok());
  auto model = make_trainable_transformer(with_lora(lora_mixed_small(), t.path / "base"), 1, true);
  const auto [tokens, valid] = rows();
  {
    torch::NoGradGuard guard;
    CHECK(torch::equal(model->forward(tokens, valid).logits, (*base)->forward(tokens, valid).logits));
  }
  std::int64_t adapters = 0, others = 0, frozen = 0;
  for (const auto& p : model->named_parameters(true)) {
    INFO(p.key());
    const bool adapter = p.key().find("lora_") != std::string::npos;
    CHECK((adapter || p.key().starts_with("v_head.")));
    (adapter ? adapters : others) += p.value().numel();
  }
  for (const auto& b : model->named_buffers(true)) frozen += b.value().numel();
  std::int64_t checkpoint = 0;
  for (const auto& [name, view] : (*base)->hf_tensors()) checkpoint += view.numel();
  CHECK(frozen == checkpoint);  // every weight of the checkpoint, the router's too
  CHECK(others == 33);          // the value head
  // Rank 4 times (in + out): q 32->32, k and v 32->16, o 32->32 in both layers; the dense
  // layer's MLP 32->40->32; the MoE layer's 4 experts 32->24->32; lm_head 32->40.
  CHECK(adapters == 2 * 4 * (64 + 48 + 48 + 64) + 4 * 3 * (32 + 40) + 4 * 4 * 3 * (32 + 24) + 4 * (32 + 40));
  // Only the adapters (and the head) get gradients; the base has none to get.
  auto out = model->forward(tokens, valid);
  (out.logits.sum() + out.values.sum()).backward();
  bool b_moved = false;
  for (const auto& p : model->named_parameters(true))
    if (p.key().find("lora_B") != std::string::npos)
      b_moved = b_moved || p.value().grad().abs().sum().item<double>() > 0;
  CHECK(b_moved);
  for (const auto& b : model->buffers(true)) CHECK_FALSE(b.requires_grad());
}

TEST_CASE("every LoRA model of a process views one frozen base, let go with the last of them", "[policy][lora]") {
  const test::TempDir t("rlx-lora-shared");
  write_base(t.path / "base");
  const auto o = with_lora(lora_mixed_small(), t.path / "base");
  CHECK(lora_bases_held() == 0);
  {
    auto learner = make_trainable_transformer(o, 1, true);
    auto explorer = make_unfilled_transformer(o, 2);
    CHECK(lora_bases_held() == 1);
    const auto a = learner->named_buffers(true), b = explorer->named_buffers(true);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].value().data_ptr() == b[i].value().data_ptr());
    // The learner's adapters are fp32 masters, drawn from its seed; a bf16
    // policy's base is a second copy, in bf16.
    for (const auto& p : learner->parameters(true)) CHECK(p.scalar_type() == torch::kFloat32);
    auto bf16 = o;
    bf16.dtype = WeightDType::bf16;
    auto sampler = make_unfilled_transformer(bf16, 2);
    CHECK(lora_bases_held() == 2);
    for (const auto& bt : sampler->buffers(true)) CHECK(bt.scalar_type() == torch::kBFloat16);
    for (const auto& p : sampler->parameters(true)) CHECK(p.scalar_type() == torch::kBFloat16);
  }
  CHECK(lora_bases_held() == 0);
}

TEST_CASE("a LoRA weight set holds the adapters and value head alone, and an explorer's policy takes it",
          "[policy][lora]") {
  const test::TempDir t("rlx-lora-set");
  auto learner = drawn_lora(t.path);
  const auto o = with_lora(lora_mixed_small(), t.path / "base");
  const auto set = export_weights(*learner, 1, "moe_transformer");
  for (const auto& nt : set.tensors)
    CHECK((nt.name.find("lora_") != std::string::npos || nt.name.starts_with("v_head.")));
  auto full = make_seeded_transformer(lora_mixed_small(), 5);
  const auto bytes = [](const WeightSetData& w) {
    std::size_t n = 0;
    for (const auto& nt : w.tensors) n += nt.byte_size();
    return n;
  };
  const auto full_bytes = bytes(export_weights(*full, 1, "moe_transformer"));
  INFO("adapter set " << bytes(set) << " bytes, full " << full_bytes);
  CHECK(bytes(set) * 3 < full_bytes);
  auto explorer = make_unfilled_transformer(o, 9);
  REQUIRE(view_weights(*explorer, set).ok());
  const auto [tokens, valid] = rows();
  torch::NoGradGuard guard;
  CHECK(torch::allclose(explorer->forward(tokens, valid).logits, learner->forward(tokens, valid).logits, 0, 1e-6));
}

TEST_CASE("a LoRA policy exported merged gives the unmerged policy's logits, and unmerged it is refused",
          "[policy][lora]") {
  const test::TempDir t("rlx-lora-merge");
  auto model = drawn_lora(t.path);
  auto refused = export_hf(model, (t.path / "plain").string());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("--merge"));
  REQUIRE(export_hf(model, (t.path / "merged").string(), StDtype::f32, 0, true).ok());
  auto merged = load_hf_transformer((t.path / "merged").string(), 48, 1);
  REQUIRE(merged.ok());
  CHECK_FALSE((*merged)->options().lora_on());
  const auto [tokens, valid] = rows();
  torch::NoGradGuard guard;
  const auto a = model->forward(tokens, valid).logits, b = (*merged)->forward(tokens, valid).logits;
  auto base = load_hf_transformer((t.path / "base").string(), 48, 1);
  const auto moved = (a - (*base)->forward(tokens, valid).logits).abs().max().item<double>();
  const auto gap = (a - b).abs().max().item<double>();
  INFO("merged vs unmerged " << gap << ", the adapters moved the logits by " << moved);
  CHECK(moved > 0.05);  // the adapters do change the function
  CHECK(gap < 1e-4);
}

TEST_CASE("a PEFT export names each adapted module as PEFT does and reads back equal, and a mismatched one is refused",
          "[policy][lora]") {
  const test::TempDir t("rlx-lora-peft");
  auto model = drawn_lora(t.path);
  const auto o = with_lora(lora_mixed_small(), t.path / "base");
  const auto dir = (t.path / "adapter").string();
  REQUIRE(export_peft(model, dir, "base").ok());
  std::ifstream in(t.path / "adapter" / "adapter_config.json");
  const auto config = nlohmann::json::parse(in);
  CHECK(config["peft_type"] == "LORA");
  CHECK(config["r"] == 4);
  CHECK(config["lora_alpha"] == 8.0);
  const auto& modules = config["target_modules"];
  CHECK(std::find(modules.begin(), modules.end(), "model.layers.0.self_attn.q_proj") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "model.layers.0.mlp.gate_proj") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "model.layers.1.mlp.experts.3.down_proj") != modules.end());
  CHECK(std::find(modules.begin(), modules.end(), "lm_head") != modules.end());
  auto file = SafetensorsFile::open((t.path / "adapter" / "adapter_model.safetensors").string());
  REQUIRE(file.ok());
  const auto* a = file->find("base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  const auto* b = file->find("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->shape == std::vector<std::int64_t>{4, 32});
  CHECK(b->shape == std::vector<std::int64_t>{16, 4});
  CHECK(file->find("base_model.model.model.layers.1.mlp.experts.2.up_proj.lora_B.weight") != nullptr);

  auto fresh = make_trainable_transformer(o, 7, true);
  REQUIRE(load_peft(fresh, dir).ok());
  const auto [tokens, valid] = rows();
  {
    torch::NoGradGuard guard;
    // The value head is RLX's own and not in the adapter: compare the logits.
    CHECK(torch::equal(fresh->forward(tokens, valid).logits, model->forward(tokens, valid).logits));
  }
  auto other_rank = with_lora(lora_mixed_small(), t.path / "base", 8);
  auto wider = make_trainable_transformer(other_rank, 1, true);
  auto r = load_peft(wider, dir);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("r is 4, the policy's [policy.lora] rank 8"));
  auto fewer = o;
  fewer.lora.targets = {"q_proj", "v_proj"};
  auto narrow = make_trainable_transformer(fewer, 1, true);
  r = load_peft(narrow, dir);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("adapts what the policy does not"));
}

TEST_CASE("a LoRA target the model lacks is refused, naming it and the model's modules", "[policy][lora]") {
  auto o = lora_mixed_small();
  o.mlp_only_layers.clear();  // every layer MoE: no dense MLP
  o.lora.rank = 4;
  o.lora.targets = {"q_proj", "gate_proj"};
  auto r = check_lora_targets(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("no \"gate_proj\""));
  CHECK_THAT(r.error().message, Catch::Contains("its modules: q_proj, k_proj, v_proj, o_proj, experts"));
  o.experts = o.top_k = 0;
  o.lora.targets = {"experts"};
  r = check_lora_targets(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("no \"experts\" (no MoE layer)"));
  o.lora.targets = {"q_proj"};
  o.lora.router = true;
  r = check_lora_targets(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("no router"));
}
