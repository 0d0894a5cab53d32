// A Mixture-of-Experts feed-forward layer: a linear router picks the top-k
// of E experts for every token; each expert is a two-layer MLP; outputs
// are mixed by the renormalised router probabilities. Expert computation
// is grouped: tokens are sorted by expert and each expert runs one matmul
// over its tokens. The same layer serves the MLP and transformer policies.
#pragma once

#include <torch/torch.h>

namespace rlx {

struct MoEOptions {
  std::int64_t in = 64;        // input width
  std::int64_t hidden = 64;    // expert hidden width
  std::int64_t out = 64;       // output width
  std::int64_t experts = 4;    // E
  std::int64_t top_k = 2;      // k <= E
};

struct MoEOutput {
  torch::Tensor y;               // [N, out]
  torch::Tensor load_balance;    // scalar: Switch-style E * sum_e f_e * P_e (1 when balanced)
  torch::Tensor router_z;        // scalar: mean logsumexp(router logits)^2
  torch::Tensor expert_fraction; // [E]: fraction of routed (token, slot) pairs per expert, sums to 1
  torch::Tensor routes;          // [N, k] int64: experts chosen per token
};

class MoELayerImpl : public torch::nn::Module {
 public:
  explicit MoELayerImpl(const MoEOptions& options);
  // x: [N, in]. Differentiable in x, router and experts.
  MoEOutput forward(const torch::Tensor& x);
  // Reference implementation: every token through every chosen expert one
  // at a time (tests compare the grouped path against it).
  torch::Tensor forward_reference(const torch::Tensor& x);
  const MoEOptions& options() const { return options_; }

 private:
  MoEOptions options_;
  torch::nn::Linear router_{nullptr};
  torch::Tensor w1_, b1_, w2_, b2_;  // [E,in,hidden] [E,hidden] [E,hidden,out] [E,out]
};
TORCH_MODULE(MoELayer);

}  // namespace rlx
