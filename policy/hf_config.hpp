// A Hugging Face config.json read into the token policy's shape and
// written from it (policy/moe_transformer.hpp, arch hf), for the families
// HfFamily names: Qwen3-MoE, Qwen2-MoE, Qwen3, Qwen2/Qwen2.5, Llama 3.
// What a config asks and the policy does not do is refused naming the
// field and its value. CAF-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// config.json's text -> the policy's shape; `max_len` bounds the context
// (max_position_embeddings when 0). Refused, by name: another model_type
// or activation, attention or MLP biases where the family has none,
// sliding windows, rope scaling other than "llama3", a size that is not
// a positive integer, a layer list out of range.
Result<TransformerOptions> hf_transformer_options(const std::string& config_json, std::int64_t max_len = 0);
// The config.json that describes `o` (its family's model_type and architecture).
std::string hf_config_json(const TransformerOptions& o);
// "qwen3_moe", "qwen2_moe", "qwen3", "qwen2", "llama".
const char* hf_model_type(HfFamily family);
// The family a model_type names; nothing for another.
std::optional<HfFamily> hf_family_of(const std::string& model_type);

}  // namespace rlx
