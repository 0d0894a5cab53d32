// The frozen base of LoRA policies (TransformerOptions::lora), held once
// per process: every LoRA model built here (the learner's, each
// explorer's, the evaluator's, the gateway rows', a KL reference) holds
// the base's weights as buffers viewing the same tensors, read from its
// file (a Hugging Face checkpoint; for RLX's own layout, weights `rlx sft
// --out` wrote) in the policy's dtype by the first model that needs
// them and let go with the last model holding them. Nothing writes them:
// the learner trains adapters (and the value head, and routers when asked),
// explorers read. A learner on a GPU moves its own copy there (Module::to).
// CAF-free.
#pragma once

#include <cstddef>

#include "core/error.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// A LoRA model of `options` (lora_on()): its base the process's one copy
// of options.lora_base in options.dtype, its adapters drawn from `seed`
// (A as PEFT draws it, B zero: the base's function) and the value head
// too; with `masters` its parameters in fp32 (a learner's master
// weights, computing in options.dtype), else in options.dtype. A trained
// router is read from the checkpoint into each model's own parameter.
// Errors: the checkpoint's (a missing tensor, a shape, an unreadable file).
Result<MoETransformer> make_lora_transformer(const TransformerOptions& options, std::uint64_t seed, bool masters);

// How many bases the process holds now (for tests and the memory report).
std::size_t lora_bases_held();

}  // namespace rlx
