// A LoRA policy's adapters as PEFT writes and reads them: DIR/adapter_config.json
// (peft_type LORA, r, lora_alpha, target_modules naming every adapted
// module of the Hugging Face model in full) and DIR/adapter_model.safetensors
// with "base_model.model.<module>.lora_A.weight" [r, in] and ".lora_B.weight"
// [out, r] in F32; PEFT scales B A by lora_alpha / r, as the policy does.
// The value head is RLX's own and not written. CAF-free.
#pragma once

#include <string>

#include "core/error.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// Writes `model`'s adapters to `dir`; `base` is the base model's name or
// folder (adapter_config.json's base_model_name_or_path). Refused for a
// policy without adapters, or with trained routers (not adapters).
Result<void> export_peft(const MoETransformer& model, const std::string& dir, const std::string& base);

// Reads a PEFT adapter written for this policy's targets into its
// adapters. Refused, naming the field or tensor and both values: another
// peft_type, r or lora_alpha than the policy's, a module the policy does
// not adapt or one it adapts missing, a shape that does not fit.
Result<void> load_peft(MoETransformer& model, const std::string& dir);

// `[policy] init_adapter = "peft:DIR"` into a LoRA model's adapters (nothing for "").
Result<void> load_init_adapter(MoETransformer& model, const std::string& init_adapter);

}  // namespace rlx
