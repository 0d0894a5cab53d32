// Hugging Face checkpoints of the decoder families HfFamily names
// (Qwen3-MoE, Qwen2-MoE, Qwen3, Qwen2/Qwen2.5, Llama 3) in and out of the
// token policy (policy/moe_transformer.hpp, arch hf): the model's
// config.json read into TransformerOptions (policy/hf_config.hpp), its
// safetensors weights loaded by the family's parameter names
// (core/safetensors.hpp: F32, F16 or BF16, one file or shards), and the
// policy exported the same way so that the family's loaders read it.
// A missing or unexpected tensor, or a shape the model does not have, is
// an error naming the tensor and both shapes. RLX's value head is not
// part of the checkpoint. CAF-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "core/safetensors.hpp"
#include "policy/hf_config.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// `[policy] init = "hf:DIR"` -> DIR ("" when init names no Hugging Face checkpoint).
std::string hf_init_dir(const std::string& init);
// The shape of a run's token policy: DIR/config.json's when [policy] init
// is "hf:DIR" (its context bounded by [policy] max_len; the model's
// vocabulary must hold the tokenizer's `vocab` ids), else the [policy]
// table's for a vocabulary of `vocab`.
Result<TransformerOptions> policy_transformer_options(const PolicyConfig& policy, std::int64_t vocab);
// [policy.lora] targets the model has (names a target it lacks, and the
// modules it has, otherwise).
Result<void> check_lora_targets(const TransformerOptions& options);
// The same, checked at start (check_policy_init): RLX_REQUIRE on failure.
TransformerOptions run_transformer_options(const PolicyConfig& policy, std::int64_t vocab);
// `[policy] init` into `model`: "hf:DIR" (load_hf_weights) or a file of
// torch::save'd weights (`rlx sft --out`, this shape; for a policy with a
// copy head, also weights trained without one or with a head of fewer
// tensors: what the file lacks of the head starts as built).
// Returns a note for the user on what was not in the file ("" when all was).
// A LoRA policy's base is read as the model is built (policy/lora_base.hpp):
// nothing is read here.
Result<std::string> load_policy_init(MoETransformer& model, const std::string& init);
// A file of torch::save'd weights into `model`, every tensor checked
// before one is copied (load_policy_init's second case); with
// `parameters_only` the buffers (a LoRA base) are left as they are.
// Adapters (lora_A, lora_B) are never read: they start as drawn.
Result<std::string> load_saved_weights(MoETransformer& model, const std::string& file, bool parameters_only = false);
// The tensors `absent` from a file of weights: only a copy head's may be
// (weights trained without one, `head_saved` false, or with a head of
// fewer tensors); they start as built, and the note says so ("" when
// none is absent). Any other is an error naming it.
Result<std::string> absent_tensors_note(const std::vector<std::string>& absent, bool head_saved);
// Loads every parameter but the value head from `checkpoint` (with
// `only`: the tensors it takes, and a checkpoint may hold more).
using HfTensorFilter = std::function<bool(const torch::Tensor& view)>;
Result<void> load_hf_weights(MoETransformer& model, const SafetensorsCheckpoint& checkpoint,
                             const HfTensorFilter& only = {});
// config.json + safetensors from DIR into a new model (the value head from `seed`).
Result<MoETransformer> load_hf_transformer(const std::string& dir, std::int64_t max_len, std::uint64_t seed);

// Writes DIR/config.json and the weights: model.safetensors, or shards of
// at most `shard_bytes` with model.safetensors.index.json (0: one file).
// dtype F32 (exact) or BF16 (rounded to nearest even). A LoRA policy is
// written with its adapters merged (`merge`; refused without it).
Result<void> export_hf(const MoETransformer& model, const std::string& dir, StDtype dtype = StDtype::f32,
                       std::uint64_t shard_bytes = 0, bool merge = false);

// The tokenizer's files beside a checkpoint's weights in `dir`:
// `tokenizer_json` (a [tokens] tokenizer ending in .json; nothing for the
// other kinds) as tokenizer.json, and the tokenizer_config.json beside it
// (its chat template) when there is one.
Result<void> copy_tokenizer_files(const std::string& tokenizer_json, const std::string& dir);

}  // namespace rlx
