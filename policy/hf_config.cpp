#include "policy/hf_config.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "core/json_int.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;

struct FamilyName {
  HfFamily family;
  const char* model_type;
  const char* architecture;
};
constexpr FamilyName kFamilies[] = {
    {HfFamily::qwen3_moe, "qwen3_moe", "Qwen3MoeForCausalLM"},
    {HfFamily::qwen2_moe, "qwen2_moe", "Qwen2MoeForCausalLM"},
    {HfFamily::qwen3, "qwen3", "Qwen3ForCausalLM"},
    {HfFamily::qwen2, "qwen2", "Qwen2ForCausalLM"},
    {HfFamily::llama, "llama", "LlamaForCausalLM"},
};

const FamilyName& names_of(HfFamily f) {
  for (const auto& n : kFamilies)
    if (n.family == f) return n;
  return kFamilies[0];
}

// rope_scaling: null, "default", or Llama 3's.
Result<RopeScaling> rope_scaling_of(const json& c) {
  const auto fail = [](const std::string& why) {
    return make_error(Errc::invalid_field, "config.json: rope_scaling: " + why);
  };
  RopeScaling s;
  const auto it = c.find("rope_scaling");
  if (it == c.end() || it->is_null()) return s;
  if (!it->is_object()) return fail("not an object or null");
  const auto type = it->value("rope_type", it->value("type", std::string()));
  if (type == "default") return s;
  if (type != "llama3") return fail("rope_type \"" + type + "\" is not supported (null, \"default\" or \"llama3\")");
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto f = it->find(key);
    if (f == it->end() || !f->is_number()) return std::nullopt;
    return f->get<double>();
  };
  const auto factor = number("factor"), low = number("low_freq_factor"), high = number("high_freq_factor");
  std::int64_t original = 0;
  if (const auto o = it->find("original_max_position_embeddings"); o != it->end())
    original = json_int64(*o).value_or(0);
  if (!factor || *factor < 1) return fail("llama3: factor must be a number of at least 1");
  if (!low || !high || *low <= 0 || *high <= *low)
    return fail("llama3: low_freq_factor and high_freq_factor must be numbers with 0 < low < high");
  if (original <= 0) return fail("llama3: original_max_position_embeddings must be a positive integer");
  s.factor = *factor;
  s.low_freq_factor = *low;
  s.high_freq_factor = *high;
  s.original_max_position = original;
  return s;
}

}  // namespace

const char* hf_model_type(HfFamily family) { return names_of(family).model_type; }

std::optional<HfFamily> hf_family_of(const std::string& model_type) {
  for (const auto& n : kFamilies)
    if (model_type == n.model_type) return n.family;
  return std::nullopt;
}

Result<TransformerOptions> hf_transformer_options(const std::string& config_json, std::int64_t max_len) {
  const auto fail = [](const std::string& why) { return make_error(Errc::invalid_field, "config.json: " + why); };
  const json c = json::parse(config_json, nullptr, false);
  if (c.is_discarded() || !c.is_object()) return fail("not a JSON object");
  try {
    const auto type = c.value("model_type", std::string());
    const auto family = hf_family_of(type);
    if (!family)
      return fail("model_type \"" + type +
                  "\": this policy reads \"qwen3_moe\", \"qwen2_moe\", \"qwen3\", \"qwen2\" and \"llama\"");
    TransformerOptions o;
    o.arch = TransformerArch::hf;
    o.family = *family;
    const bool qwen2 = o.qkv_bias();
    if (const auto act = c.value("hidden_act", std::string("silu")); act != "silu")
      return fail("hidden_act \"" + act + "\": only silu is supported");
    if (!qwen2 && c.value("attention_bias", false)) return fail("attention_bias = true is not supported");
    if (c.value("mlp_bias", false)) return fail("mlp_bias = true is not supported");
    if (o.family == HfFamily::qwen2_moe && !c.value("qkv_bias", true))
      return fail("qkv_bias = false is not supported (Qwen2-MoE's q, k, v have biases)");
    if (c.value("use_sliding_window", false)) return fail("use_sliding_window = true is not supported");
    if (const auto it = c.find("layer_types"); it != c.end() && it->is_array())
      for (const auto& t : *it)
        if (t != "full_attention")
          return fail("layer_types: \"" + t.dump() + "\" is not supported (full_attention only)");
    auto scaling = rope_scaling_of(c);
    if (!scaling) return scaling.error();
    o.rope_scaling = *scaling;
    // A size: its fallback when absent (a required one has none); a value that
    // is not an integer that fits (a float, a string) is named in the error.
    std::string bad;
    const auto size = [&](const char* key, std::optional<std::int64_t> fallback) {
      const auto it = c.find(key);
      const auto v = it == c.end() || it->is_null() ? fallback : json_int64(*it);
      if (!v && bad.empty()) bad = key;
      return v.value_or(-1);
    };
    const auto positive = [](std::int64_t v) { return v > 0 && v <= (1 << 24); };
    o.vocab = size("vocab_size", std::nullopt);
    o.d_model = size("hidden_size", std::nullopt);
    o.layers = size("num_hidden_layers", std::nullopt);
    o.heads = size("num_attention_heads", std::nullopt);
    o.kv_heads = size("num_key_value_heads", o.heads);
    o.head_dim = size("head_dim", o.heads > 0 ? o.d_model / o.heads : 0);
    o.rms_eps = c.value("rms_norm_eps", 1e-6);
    o.rope_theta = c.value("rope_theta", 10000.0);
    o.tie_embeddings = c.value("tie_word_embeddings", false);
    o.max_len = max_len > 0 ? max_len : size("max_position_embeddings", 4096);
    if (o.moe_family()) {
      o.experts = size("num_experts", std::nullopt);
      o.top_k = size("num_experts_per_tok", std::nullopt);
      o.expert_hidden = size("moe_intermediate_size", std::nullopt);
      o.norm_topk_prob = c.value("norm_topk_prob", false);
      o.sparse_step = size("decoder_sparse_step", 1);
      if (const auto it = c.find("mlp_only_layers"); it != c.end() && !it->is_null()) {
        if (!it->is_array()) return fail("mlp_only_layers is not a list of layer numbers");
        for (const auto& l : *it) {
          const auto v = json_int64(l);
          if (!v || *v < 0 || *v >= o.layers)
            return fail(fmt::format("mlp_only_layers: {} is not a layer number (0..{})", l.dump(), o.layers - 1));
          o.mlp_only_layers.push_back(*v);
        }
      }
      if (!positive(o.sparse_step)) return fail("decoder_sparse_step is not a positive integer");
      if (o.family == HfFamily::qwen2_moe)
        o.shared_expert_hidden = size("shared_expert_intermediate_size", std::nullopt);
    } else {
      o.experts = o.top_k = o.expert_hidden = 0;
    }
    bool dense_layer = false;
    for (std::int64_t l = 0; l < o.layers; ++l) dense_layer = dense_layer || !o.moe_layer(l);
    if (dense_layer) o.mlp_hidden = size("intermediate_size", std::nullopt);
    if (!bad.empty()) return fail(bad + " is missing or not an integer");
    for (const auto& [key, v] : {std::pair{"vocab_size", o.vocab},
                                 {"hidden_size", o.d_model},
                                 {"num_hidden_layers", o.layers},
                                 {"num_attention_heads", o.heads},
                                 {"num_key_value_heads", o.kv_heads},
                                 {"head_dim", o.head_dim},
                                 {"max_position_embeddings", o.max_len}})
      if (!positive(v)) return fail(fmt::format("{} = {} is not a positive integer", key, v));
    if (o.moe_family())
      for (const auto& [key, v] : {std::pair{"num_experts", o.experts}, {"moe_intermediate_size", o.expert_hidden}})
        if (!positive(v)) return fail(fmt::format("{} = {} is not a positive integer", key, v));
    if (dense_layer && !positive(o.mlp_hidden))
      return fail(fmt::format("intermediate_size = {} is not a positive integer", o.mlp_hidden));
    if (o.family == HfFamily::qwen2_moe && !positive(o.shared_expert_hidden))
      return fail(
          fmt::format("shared_expert_intermediate_size = {} is not a positive integer", o.shared_expert_hidden));
    if (o.heads % o.kv_heads != 0)
      return fail(fmt::format("{} heads are not a multiple of {} key/value heads", o.heads, o.kv_heads));
    if (o.head_dim % 2 != 0) return fail("head_dim must be even (rotary embeddings)");
    if (o.moe_family() && (o.top_k < 1 || o.top_k > o.experts))
      return fail("num_experts_per_tok must be 1..num_experts");
    if (qwen2 && (o.head_dim != o.d_model / o.heads || o.d_model % o.heads != 0))
      return fail(std::string(hf_model_type(o.family)) + ": head_dim must be hidden_size / num_attention_heads");
    return o;
  } catch (const json::exception& e) {
    return fail(std::string("a field is missing or of the wrong type: ") + e.what());
  }
}

std::string hf_config_json(const TransformerOptions& o) {
  const auto& names = names_of(o.family);
  json c = {{"architectures", {names.architecture}},
            {"model_type", names.model_type},
            {"vocab_size", o.vocab},
            {"hidden_size", o.d_model},
            {"num_hidden_layers", o.layers},
            {"num_attention_heads", o.heads},
            {"num_key_value_heads", o.kv_heads_or_heads()},
            {"head_dim", o.head_width()},
            {"rms_norm_eps", o.rms_eps},
            {"rope_theta", o.rope_theta},
            {"rope_scaling", nullptr},
            {"tie_word_embeddings", o.tie_embeddings},
            {"max_position_embeddings", o.max_len},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"use_sliding_window", false},
            {"torch_dtype", "float32"}};
  if (o.moe_family()) {
    c["num_experts"] = o.experts;
    c["num_experts_per_tok"] = o.top_k;
    c["moe_intermediate_size"] = o.expert_hidden;
    c["intermediate_size"] = o.mlp_hidden > 0 ? o.mlp_hidden : o.expert_hidden;
    c["decoder_sparse_step"] = o.sparse_step;
    c["mlp_only_layers"] = o.mlp_only_layers;
    c["norm_topk_prob"] = o.norm_topk_prob;
  } else {
    c["intermediate_size"] = o.mlp_hidden;
  }
  if (o.rope_scaling.factor > 0)
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", o.rope_scaling.factor},
                         {"low_freq_factor", o.rope_scaling.low_freq_factor},
                         {"high_freq_factor", o.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", o.rope_scaling.original_max_position}};
  if (o.family == HfFamily::llama) {
    c.erase("use_sliding_window");
    c["mlp_bias"] = false;
  }
  if (o.qkv_bias()) {  // Qwen2's q, k and v always have biases; its head width is d_model / heads
    c.erase("head_dim");
    c.erase("attention_bias");
  }
  if (o.family == HfFamily::qwen2_moe) {
    c["qkv_bias"] = true;
    c["shared_expert_intermediate_size"] = o.shared_expert_hidden;
  }
  return c.dump(2) + "\n";
}

}  // namespace rlx
