// LoRA over RLX's own layout ([policy.lora] with init = a weights file
// `rlx sft --out` wrote): a fresh adapter computes the start's function;
// the base is buffers every model of the process views, the heads are read
// from the file, only adapters and heads are parameters and in a weight
// set; targets the layout lacks and a base that is not a weights file are
// refused by name.
#include "tests/torch_catch.hpp"

#include <filesystem>

#include "learner/trainer.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/lora_base.hpp"
#include "policy/weights_io.hpp"
#include "tests/helpers.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace native_lora {

TransformerOptions start_shape() {
  auto o = test::small_transformer(24, 30);
  o.copy_head = true;
  return o;
}

// The start: start_shape() drawn from seed 5 and saved as `rlx sft --out` saves.
MoETransformer write_start(const fs::path& file) {
  auto model = make_seeded_transformer(native_lora::start_shape(), 5);
  torch::save(model, file.string());
  return model;
}

TransformerOptions with_lora(const fs::path& base) {
  auto o = native_lora::start_shape();
  o.lora.rank = 4;
  o.lora.alpha = 8;
  o.lora.targets = {"qkv", "o_proj", "experts", "lm_head"};
  o.lora_base = base.string();
  return o;
}

std::pair<torch::Tensor, torch::Tensor> rows() {
  torch::manual_seed(11);
  auto tokens = torch::randint(30, {2, 9}, torch::kLong);
  auto valid = torch::ones({2, 9}, torch::kBool);
  valid[1].narrow(0, 0, 3).fill_(false);
  return {tokens, valid};
}

bool adapter(const std::string& name) { return name.find("lora_") != std::string::npos; }

}  // namespace native_lora

TEST_CASE("a LoRA policy over RLX's own layout computes its start's function and trains adapters and heads alone",
          "[policy][lora]") {
  const test::TempDir t("rlx-native-lora");
  auto start = native_lora::write_start(t.path / "start.pt");
  auto model = make_trainable_transformer(native_lora::with_lora(t.path / "start.pt"), 1, true);
  const auto [tokens, valid] = native_lora::rows();
  {
    torch::NoGradGuard guard;
    auto mine = model->forward(tokens, valid), theirs = start->forward(tokens, valid);
    CHECK(torch::equal(mine.logits, theirs.logits));
    CHECK(torch::equal(mine.values, theirs.values));  // the value head is the file's, not drawn
  }
  std::int64_t adapters = 0, heads = 0, frozen = 0, start_params = 0;
  for (const auto& p : model->named_parameters(true)) {
    INFO(p.key());
    CHECK((native_lora::adapter(p.key()) || p.key().starts_with("v_head.") || p.key().starts_with("copy.")));
    (native_lora::adapter(p.key()) ? adapters : heads) += p.value().numel();
  }
  for (const auto& b : model->buffers(true)) frozen += b.numel();
  for (const auto& p : start->parameters(true)) start_params += p.numel();
  CHECK(frozen + heads == start_params);  // the router frozen with the base
  // Rank 4 times (in + out), both layers: qkv 16->48, o_proj 16->16, 4
  // experts' w1 16->24 and w2 24->16; lm_head 16->30 once.
  CHECK(adapters == 2 * 4 * ((16 + 48) + (16 + 16) + 4 * ((16 + 24) + (24 + 16))) + 4 * (16 + 30));
  auto out = model->forward(tokens, valid);
  (out.logits.sum() + out.values.sum()).backward();
  bool b_moved = false;
  for (const auto& p : model->named_parameters(true))
    if (p.key().find("lora_B") != std::string::npos)
      b_moved = b_moved || p.value().grad().abs().sum().item<double>() > 0;
  CHECK(b_moved);
  for (const auto& b : model->buffers(true)) CHECK_FALSE(b.requires_grad());
}

TEST_CASE("every LoRA model of RLX's own layout views one base, and a version carries adapters and heads alone",
          "[policy][lora]") {
  const test::TempDir t("rlx-native-lora-set");
  auto start = native_lora::write_start(t.path / "start.pt");
  const auto o = native_lora::with_lora(t.path / "start.pt");
  REQUIRE(lora_bases_held() == 0);
  {
    auto learner = make_trainable_transformer(o, 1, true);
    auto explorer = make_unfilled_transformer(o, 2);
    CHECK(lora_bases_held() == 1);
    const auto a = learner->named_buffers(true), b = explorer->named_buffers(true);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].value().data_ptr() == b[i].value().data_ptr());
    {
      torch::NoGradGuard guard;
      torch::manual_seed(3);
      for (auto& p : learner->named_parameters(true))
        if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.2);
    }
    const auto set = export_weights(*learner, 1, "moe_transformer");
    std::size_t set_bytes = 0, full_bytes = 0;
    for (const auto& nt : set.tensors) {
      CHECK((native_lora::adapter(nt.name) || nt.name.starts_with("v_head.") || nt.name.starts_with("copy.")));
      set_bytes += nt.byte_size();
    }
    for (const auto& nt : export_weights(*start, 1, "moe_transformer").tensors) full_bytes += nt.byte_size();
    INFO("adapter set " << set_bytes << " bytes, full " << full_bytes);
    CHECK(set_bytes < full_bytes);
    REQUIRE(view_weights(*explorer, set).ok());
    const auto [tokens, valid] = native_lora::rows();
    torch::NoGradGuard guard;
    auto mine = explorer->forward(tokens, valid).logits;
    CHECK(torch::allclose(mine, learner->forward(tokens, valid).logits, 0, 1e-6));
    CHECK_FALSE(torch::allclose(mine, start->forward(tokens, valid).logits, 0, 1e-3));  // the adapters act
  }
  CHECK(lora_bases_held() == 0);
}

TEST_CASE("a LoRA target RLX's own layout lacks, and a base that is no weights file, are refused by name",
          "[policy][lora]") {
  const test::TempDir t("rlx-native-lora-bad");
  native_lora::write_start(t.path / "start.pt");
  auto p = test::tiny_policy(24);  // start_shape()'s [policy] table
  p.layers = 2;
  p.experts = 4;
  p.top_k = 2;
  p.expert_hidden = 24;
  p.copy_head = true;
  p.init = (t.path / "start.pt").string();
  p.lora.rank = 4;
  p.lora.targets = {"q_proj", "experts"};
  auto o = policy_transformer_options(p, 30);
  REQUIRE_FALSE(o.ok());
  CHECK_THAT(o.error().message, Catch::Contains("no \"q_proj\"") && Catch::Contains("\"qkv\"") &&
                                    Catch::Contains("its modules: qkv, o_proj, experts, lm_head"));
  p.lora.targets = {"qkv", "experts"};
  REQUIRE(policy_transformer_options(p, 30).ok());
  fs::create_directories(t.path / "run");
  p.init = (t.path / "run").string();
  TokensConfig tokens;
  auto checked = check_policy_init(p, tokens);
  REQUIRE_FALSE(checked.ok());
  CHECK_THAT(checked.error().message,
             Catch::Contains("a LoRA policy's frozen base") && Catch::Contains((t.path / "run").string()));
}
