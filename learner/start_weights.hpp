// The weights a token policy starts from, whatever holds them: what
// `[policy] init`, `rlx sft --init` and `rlx export --from` name.
//   "hf:DIR"        a Hugging Face checkpoint (policy/hf_checkpoint.hpp)
//   ckpt-N.bin      a learner checkpoint (learner/checkpoint.hpp): its
//                   trainer's parameters at version N
//   a folder        a run's log_dir: its newest learner checkpoint
//   any other file  weights `rlx sft --out` wrote (torch::save of the model)
// Only the weights are taken: the optimizer's moments, the version and the
// run's counters start afresh (a run continues itself by resuming in its
// own log_dir). Weights of another shape are refused naming the tensor,
// and a damaged checkpoint with the reason. CAF-free.
#pragma once

#include <string>

#include "core/error.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

// Loads `init` into `model`; returns what was read, for the log (e.g.
// "learner checkpoint runs/x/checkpoints/ckpt-00000042.bin, version 42").
Result<std::string> load_start_weights(MoETransformer& model, const std::string& init);

}  // namespace rlx
