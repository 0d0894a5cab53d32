// The Hugging Face decoder families (arch hf: Qwen3-MoE, Qwen2-MoE, Qwen3,
// Qwen2, Llama 3) and their checkpoints: a small random model's logits
// equal, within fp32 tolerance, those of a reference forward in plain
// Python written from the public model definitions
// (tests/policy/hf_reference.py, which
// reads config.json and model.safetensors itself), for a left-padded
// batch and through the KV cache; export then import is bit-exact (F32,
// sharded too), BF16 rounds; a checkpoint or config.json this policy
// cannot take is refused naming the tensor or field.
#include "tests/torch_catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/child_process.hpp"
#include "policy/hf_checkpoint.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using json = nlohmann::json;

namespace {

TransformerOptions qwen_small(bool tied = false) {
  TransformerOptions o;
  o.arch = TransformerArch::hf;
  o.vocab = 40;
  o.d_model = 16;
  o.heads = 4;
  o.kv_heads = 2;  // grouped-query
  o.head_dim = 8;  // not d_model / heads
  o.layers = 2;
  o.experts = 4;
  o.top_k = 2;
  o.expert_hidden = 12;
  o.max_len = 32;
  o.rope_theta = 10000;
  o.tie_embeddings = tied;
  return o;
}

// Qwen2-MoE's shape: head_dim d_model / heads, biases on q, k, v, no q/k
// norms, a shared expert.
TransformerOptions qwen2_small() {
  auto o = qwen_small();
  o.family = HfFamily::qwen2_moe;
  o.head_dim = 4;
  o.shared_expert_hidden = 10;
  return o;
}

// A dense family's shape: every layer a SwiGLU MLP, no experts.
TransformerOptions dense_small(HfFamily family) {
  auto o = qwen_small();
  o.family = family;
  o.experts = o.top_k = o.expert_hidden = 0;
  o.mlp_hidden = 20;
  if (family == HfFamily::qwen2) o.head_dim = 4;
  if (family == HfFamily::llama) {  // Llama 3's rope scaling: short, blended and long wavelengths all present
    o.tie_embeddings = true;
    o.rope_scaling = RopeScaling{8, 1, 4, 64};
  }
  return o;
}

// Qwen3-MoE with dense layers among the MoE ones: layer 0 dense by
// decoder_sparse_step 2, layer 1 MoE, layer 2 dense by mlp_only_layers.
TransformerOptions mixed_small() {
  auto o = qwen_small();
  o.layers = 3;
  o.sparse_step = 2;
  o.mlp_only_layers = {2};
  o.mlp_hidden = 20;
  return o;
}

struct FamilyCase {
  const char* name;
  TransformerOptions options;
};
std::vector<FamilyCase> family_cases() {
  return {{"qwen3_moe", qwen_small()},          {"qwen2_moe", qwen2_small()},
          {"qwen3_moe with dense layers", mixed_small()}, {"qwen3", dense_small(HfFamily::qwen3)},
          {"qwen2", dense_small(HfFamily::qwen2)}, {"llama with llama3 rope scaling", dense_small(HfFamily::llama)}};
}

// A seeded model whose norms are not ones (so the test sees them).
MoETransformer random_qwen(const TransformerOptions& o, std::uint64_t seed) {
  auto m = make_seeded_transformer(o, seed);
  torch::NoGradGuard guard;
  torch::manual_seed(seed + 1);
  for (auto& [name, t] : m->hf_tensors())
    if (name.find("norm.weight") != std::string::npos) t.uniform_(0.5, 1.5);
  return m;
}

const std::vector<std::vector<std::int64_t>> kRows = {{3, 17, 5, 22, 9}, {1, 2, 3, 4, 5, 6, 7}, {39, 0, 12}};

// The rows left-padded into one batch.
std::pair<torch::Tensor, torch::Tensor> batch_of(const std::vector<std::vector<std::int64_t>>& rows) {
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  auto tokens = torch::zeros({static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(width)}, torch::kLong);
  auto valid = torch::zeros_like(tokens, torch::kBool);
  for (std::size_t b = 0; b < rows.size(); ++b)
    for (std::size_t i = 0; i < rows[b].size(); ++i) {
      const auto col = static_cast<std::int64_t>(width - rows[b].size() + i);
      tokens[static_cast<std::int64_t>(b)][col] = rows[b][i];
      valid[static_cast<std::int64_t>(b)][col] = true;
    }
  return {tokens, valid};
}

}  // namespace

TEST_CASE("a policy of each Hugging Face family gives the logits of a reference forward written from the public "
          "model definition, padded and through the KV cache",
          "[policy][hf]") {
  if (::access("/usr/bin/python3", X_OK) != 0) test::skip_test("no python3");
  const auto which = GENERATE(range(0, 6));
  const auto family = family_cases().at(static_cast<std::size_t>(which));
  INFO(family.name);
  const test::TempDir t("rlx-hf-reference");
  auto model = random_qwen(family.options, 3);
  REQUIRE(export_hf(model, t.path.string()).ok());
  std::ofstream(t.path / "tokens.json") << json(kRows).dump();
  const auto out_path = t.path / "reference.json";
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ChildOptions o;
  o.stdout_fd = out;
  auto pid = spawn_child({"/usr/bin/python3", std::string(RLX_SOURCE_DIR) + "/tests/policy/hf_reference.py",
                          t.path.string(), (t.path / "tokens.json").string()},
                         o);
  ::close(out);
  REQUIRE(pid.ok());
  REQUIRE(reap_children({*pid}, std::chrono::seconds(120)).at(0).clean);
  std::ifstream in(out_path);
  const auto reference = json::parse(in);
  REQUIRE(reference.size() == kRows.size());

  torch::NoGradGuard guard;
  auto [tokens, valid] = batch_of(kRows);
  const auto whole = model->forward(tokens, valid).logits;  // [B, S, V]
  auto cache = model->new_cache(tokens.size(0), tokens.size(1));
  std::vector<torch::Tensor> steps;
  for (std::int64_t s = 0; s < tokens.size(1); ++s)
    steps.push_back(model->step(tokens.narrow(1, s, 1), valid.narrow(1, s, 1), cache).logits);
  const auto cached = torch::cat(steps, 1);
  double worst = 0, worst_cached = 0;
  for (std::size_t b = 0; b < kRows.size(); ++b) {
    const auto n = static_cast<std::int64_t>(kRows[b].size());
    const auto ours = whole[static_cast<std::int64_t>(b)].narrow(0, tokens.size(1) - n, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto want = reference[b][static_cast<std::size_t>(i)].get<std::vector<double>>();
      REQUIRE(static_cast<std::int64_t>(want.size()) == model->options().vocab);
      for (std::int64_t v = 0; v < model->options().vocab; ++v)
        worst = std::max(worst, std::abs(ours[i][v].item<double>() - want[static_cast<std::size_t>(v)]));
    }
    const auto c = cached[static_cast<std::int64_t>(b)].narrow(0, tokens.size(1) - n, n);
    worst_cached = std::max(worst_cached, (c - ours).abs().max().item<double>());
  }
  INFO("largest logit gap against the reference " << worst << ", cached against whole " << worst_cached);
  CHECK(worst < 1e-4);
  CHECK(worst_cached < 1e-5);
}

TEST_CASE("a Qwen3-MoE policy exported as a Hugging Face checkpoint imports bit-exact, sharded too, and BF16 rounds",
          "[policy][hf]") {
  const test::TempDir t("rlx-qwen3-export");
  torch::NoGradGuard guard;
  auto [tokens, valid] = batch_of(kRows);
  for (const bool tied : {false, true}) {
    auto model = random_qwen(qwen_small(tied), 7);
    const auto want = model->forward(tokens, valid).logits;
    const auto one = (t.path / (tied ? "tied" : "one")).string(), sharded = (t.path / (tied ? "tied-sh" : "sh")).string();
    REQUIRE(export_hf(model, one).ok());
    REQUIRE(export_hf(model, sharded, StDtype::f32, 4096).ok());
    CHECK(std::filesystem::exists(std::filesystem::path(sharded) / "model.safetensors.index.json"));
    std::size_t shards = 0;
    for (const auto& f : std::filesystem::directory_iterator(sharded)) shards += f.path().extension() == ".safetensors";
    CHECK(shards >= 2);
    for (const auto& dir : {one, sharded}) {
      auto back = load_hf_transformer(dir, 32, 99);
      INFO((back ? std::string() : back.error().message));
      REQUIRE(back.ok());
      CHECK(torch::equal((*back)->forward(tokens, valid).logits, want));
    }
  }
  auto q2 = random_qwen(qwen2_small(), 8);
  REQUIRE(export_hf(q2, (t.path / "qwen2").string()).ok());
  auto q2_back = load_hf_transformer((t.path / "qwen2").string(), 32, 99);
  REQUIRE(q2_back.ok());
  CHECK((*q2_back)->options().family == HfFamily::qwen2_moe);
  CHECK((*q2_back)->options().shared_expert_hidden == 10);
  CHECK(torch::equal((*q2_back)->forward(tokens, valid).logits, q2->forward(tokens, valid).logits));
  auto model = random_qwen(qwen_small(), 7);
  REQUIRE(export_hf(model, (t.path / "bf16").string(), StDtype::bf16).ok());
  auto half = load_hf_transformer((t.path / "bf16").string(), 32, 99);
  REQUIRE(half.ok());
  const auto w = model->hf_tensors().at(1).second, w_half = (*half)->hf_tensors().at(1).second;
  CHECK(bf16_to_f32(f32_to_bf16(w.flatten()[0].item<float>())) == w_half.flatten()[0].item<float>());
  const auto gap = ((*half)->forward(tokens, valid).logits - model->forward(tokens, valid).logits).abs().max().item<double>();
  CHECK(gap > 0);
  CHECK(gap < 0.1);
}

TEST_CASE("a checkpoint or config.json the Qwen3-MoE policy cannot take is refused naming the tensor or the field",
          "[policy][hf]") {
  const test::TempDir t("rlx-qwen3-refusals");
  auto model = random_qwen(qwen_small(), 1);
  const auto dir = (t.path / "m").string();
  REQUIRE(export_hf(model, dir).ok());
  // A config whose shape is not the checkpoint's.
  auto other = qwen_small();
  other.expert_hidden = 10;
  std::ofstream(t.path / "m" / "config.json") << hf_config_json(other);
  auto wrong = load_hf_transformer(dir, 32, 1);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.error().message, Catch::Contains("tensor model.layers.0.mlp.experts.0.gate_proj.weight") &&
                                        Catch::Contains("12x16") && Catch::Contains("10x16"));
  // Untied weights into a tied model: lm_head is a tensor the model does not have.
  std::ofstream(t.path / "m" / "config.json") << hf_config_json(qwen_small(true));
  CHECK_THAT(load_hf_transformer(dir, 32, 1).error().message, Catch::Contains("does not: lm_head.weight"));
  // A tensor missing.
  const float x = 1.0f;
  REQUIRE(write_safetensors((t.path / "m" / "model.safetensors").string(), {{"model.norm.weight", StDtype::f32, {1}, &x, 4}}).ok());
  std::ofstream(t.path / "m" / "config.json") << hf_config_json(qwen_small());
  CHECK_THAT(load_hf_transformer(dir, 32, 1).error().message, Catch::Contains("no tensor model.embed_tokens.weight"));
  // config.json asking for what this policy does not do.
  auto config = json::parse(hf_config_json(qwen_small()));
  for (const auto& [field, value, says] :
       {std::tuple{"model_type", json("gpt2"), "model_type \"gpt2\""},
        std::tuple{"attention_bias", json(true), "attention_bias"},
        std::tuple{"mlp_only_layers", json::array({5}), "mlp_only_layers: 5 is not a layer number (0..1)"},
        std::tuple{"mlp_only_layers", json::array({0}), "intermediate_size"},  // a dense layer needs its width
        std::tuple{"decoder_sparse_step", json(0), "decoder_sparse_step"},
        std::tuple{"hidden_act", json("gelu"), "hidden_act \"gelu\""}, std::tuple{"mlp_bias", json(true), "mlp_bias"},
        std::tuple{"use_sliding_window", json(true), "use_sliding_window"},
        std::tuple{"layer_types", json::array({"sliding_attention"}), "layer_types"},
        std::tuple{"rope_scaling", json{{"type", "yarn"}}, "rope_type \"yarn\" is not supported"},
        std::tuple{"rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8}}, "low_freq_factor"},
        std::tuple{"num_key_value_heads", json(3), "multiple"}, std::tuple{"num_experts_per_tok", json(9), "1..num_experts"},
        std::tuple{"hidden_size", json("wide"), "hidden_size is missing or not an integer"},
        std::tuple{"hidden_size", json(2e57), "hidden_size is missing or not an integer"},  // no cast of a float
        std::tuple{"head_dim", json(16.5), "head_dim is missing or not an integer"},
        std::tuple{"vocab_size", json(nullptr), "vocab_size is missing"}}) {
    auto c = config;
    c.erase("intermediate_size");
    c[field] = value;
    auto r = hf_transformer_options(c.dump());
    INFO(field);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains(says));
  }
  CHECK(hf_transformer_options(config.dump(), 64)->max_len == 64);
  CHECK_FALSE(hf_transformer_options("[]").ok());
}

TEST_CASE("a dense family's policy exports and imports bit-exact, its config.json naming the family, and a dense "
          "config missing what its layers need is refused by name",
          "[policy][hf]") {
  const test::TempDir t("rlx-hf-dense");
  torch::NoGradGuard guard;
  auto [tokens, valid] = batch_of(kRows);
  for (const auto& family : family_cases()) {
    INFO(family.name);
    auto model = random_qwen(family.options, 5);
    const auto dir = (t.path / hf_model_type(family.options.family)).string() + std::to_string(family.options.layers);
    REQUIRE(export_hf(model, dir).ok());
    auto back = load_hf_transformer(dir, 32, 99);
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back.ok());
    const auto& o = (*back)->options();
    CHECK(o.family == family.options.family);
    CHECK(o.mlp_only_layers == family.options.mlp_only_layers);
    CHECK(o.sparse_step == family.options.sparse_step);
    CHECK(o.rope_scaling.factor == family.options.rope_scaling.factor);
    CHECK(o.rope_scaling.original_max_position == family.options.rope_scaling.original_max_position);
    const auto out = (*back)->forward(tokens, valid);
    CHECK(torch::equal(out.logits, model->forward(tokens, valid).logits));
    // A dense layer routes nothing: its routes are -1; a dense model has none at all.
    std::int64_t moe_layers = 0;
    for (std::int64_t l = 0; l < o.layers; ++l) {
      moe_layers += o.moe_layer(l);
      if (!o.moe_layer(l) && o.top_k > 0) CHECK((out.routes[l] == -1).all().item<bool>());
    }
    if (moe_layers == 0) {
      CHECK(out.routes.size(3) == 0);
      CHECK(out.load_balance.item<double>() == 1.0);
      CHECK(out.router_z.item<double>() == 0.0);
    }
    const auto config = json::parse(std::ifstream(std::filesystem::path(dir) / "config.json"));
    CHECK(config["model_type"] == hf_model_type(family.options.family));
  }
  auto config = json::parse(hf_config_json(dense_small(HfFamily::llama)));
  CHECK(config["architectures"][0] == "LlamaForCausalLM");
  CHECK(config["rope_scaling"]["rope_type"] == "llama3");
  config.erase("intermediate_size");
  CHECK_THAT(hf_transformer_options(config.dump()).error().message, Catch::Contains("intermediate_size is missing"));
  auto qwen2 = json::parse(hf_config_json(dense_small(HfFamily::qwen2)));
  CHECK(qwen2["model_type"] == "qwen2");
  CHECK_FALSE(qwen2.contains("head_dim"));
  qwen2["head_dim"] = 8;
  CHECK_THAT(hf_transformer_options(qwen2.dump()).error().message,
             Catch::Contains("head_dim must be hidden_size / num_attention_heads"));
}
