// The GPU measurement of issue 8 (docs/BENCHMARKS.md "On a GPU"): the MoE
// transformer's training step on a device in a given dtype (tokens/s,
// achieved FLOP/s, model FLOP utilisation against the device's own dense
// matrix product measured in the same run), and the publish of its
// weights to an explorer's CPU copy (export: device -> host, fp32,
// checksum; import into the explorer's model) against a raw device ->
// host copy of the same bytes. Compute only: LibTorch and the policy, so
// that bench/gpu/run.sh can build it against a CUDA LibTorch alone.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "policy/moe_transformer.hpp"

namespace rlx {

// Model FLOPs of one training step per token (forward + backward = 3x the
// forward), counting matrix products only: 2 per multiply-add of every
// weight a token passes through (attention projections, the router, the
// top_k experts it is routed to, the language-model and value heads) plus
// attention's two products over the `seq` keys (QK^T and AV, computed
// whole: the model masks, it does not skip). Embeddings, norms and
// softmaxes are left out, as PaLM's MFU does.
double training_flops_per_token(const TransformerOptions& model, std::int64_t seq);

struct StepBenchOptions {
  TransformerOptions model;
  std::string device = "cpu";         // "cpu", "cuda", "cuda:N"
  torch::ScalarType dtype = torch::kBFloat16;
  std::int64_t batch = 8;             // sequences per step
  std::int64_t seq = 256;             // tokens per sequence (<= model.max_len)
  int warmup = 2;                     // steps not timed
  int steps = 5;                      // steps timed
  std::int64_t matmul_n = 4096;       // the raw baseline: an n x n x n product in dtype
  std::uint64_t seed = 1;
};

struct StepBenchResult {
  double step_s = 0;                  // mean over the timed steps
  double tokens_per_s = 0;
  double flops_per_token = 0;
  double model_tflops = 0;            // achieved by the training step
  double matmul_tflops = 0;           // the device's dense product, same dtype, same run
  double first_loss = 0, last_loss = 0;
  std::int64_t parameters = 0;
  // Where a step's time goes: further steps, the device synchronised
  // after each stage (so their sum exceeds step_s a little); medians.
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
};

// Trains a seeded model on random tokens (next-token cross-entropy plus
// the load-balancing and router z losses, Adam) and times it. Throws
// c10::Error for a device this LibTorch cannot use.
StepBenchResult run_step_bench(const StepBenchOptions& options);

struct PublishBenchResult {
  double export_s = 0;                // export_weights on the device model (median)
  double import_s = 0;                // import_weights into the explorer's CPU model (median)
  double raw_copy_s = 0;              // one device -> host copy of the same fp32 bytes (median)
  double bytes = 0;                   // fp32 bytes of the weight set
  bool checksums_match = false;       // the explorer's copy equals the learner's
  // What a learner publishes since encode_module_weights: the parameters
  // into the WeightSet message, checked as the store checks it (median);
  // 0 in a build without Cap'n Proto (RLX_GPU_WIRE off).
  double encode_s = 0;
  bool encoded_matches = false;       // its checksum is export_weights'
};

// The publish path from a learner on `device` (parameters in `dtype`) to
// an explorer's fp32 CPU model, `rounds` times.
PublishBenchResult run_publish_bench(const TransformerOptions& model, const std::string& device,
                                     torch::ScalarType dtype, int rounds);

}  // namespace rlx
