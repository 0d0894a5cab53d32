// A Mixture-of-Experts feed-forward layer: a linear router picks the top-k
// of E experts for every token; each expert is a two-layer MLP; outputs
// are mixed by the renormalised router probabilities. Expert computation
// is grouped: tokens are sorted by expert and each expert runs one matmul
// over its tokens. The same layer serves the MLP and transformer policies.
//
// Options the transformer uses: a GELU or SwiGLU expert, an expert
// capacity (capacity_factor * N * k / E pairs per expert; the pairs past
// it, in token order, are dropped: their slot adds nothing), and router
// replay (forward with the routes a rollout recorded instead of the
// router's own top-k; the gates are still the router's probabilities of
// those experts, so the router keeps its gradient).
#pragma once

#include <torch/torch.h>

#include <mutex>

#include "policy/linear_map.hpp"

namespace rlx {

struct MoEOptions {
  std::int64_t in = 64;        // input width
  std::int64_t hidden = 64;    // expert hidden width
  std::int64_t out = 64;       // output width
  std::int64_t experts = 4;    // E
  std::int64_t top_k = 2;      // k <= E
  bool gelu = false;           // expert activation: tanh (the MLP policy) or GELU
  double capacity_factor = 0;  // 0 = no capacity: no token is dropped
  // The field's experts (Qwen3-MoE, OLMoE, Mixtral): down(silu(gate(x)) *
  // up(x)), no biases, a router without bias; `renormalise` false keeps
  // the top-k probabilities as they are (norm_topk_prob = false).
  bool swiglu = false;
  bool renormalise = true;
  // swiglu: a shared expert every token goes through as well (Qwen2-MoE),
  // of this hidden width (0: none), its output scaled by
  // sigmoid(shared_gate . x).
  std::int64_t shared_hidden = 0;
  // swiglu: false leaves the experts' weights undrawn (allocated, not
  // touched) for a caller that fills them next (policy/linear_map.hpp).
  bool draw = true;
  // LoRA (policy/linear_map.hpp): `experts_adapter.frozen` holds the
  // experts (and a shared one) as buffers; with a rank, every routed
  // expert's projections get an adapter, batched over experts
  // (lora_A_gate [E, rank, in], lora_B_gate [E, hidden, rank], likewise
  // up; lora_A_down [E, rank, hidden], lora_B_down [E, out, rank]; tanh
  // and GELU experts: w1 adapted as up, w2 as down, no gate).
  // `router_frozen` holds the router as a buffer.
  Adapter experts_adapter{};
  bool router_frozen = false;
};

struct MoEOutput {
  torch::Tensor y;               // [N, out]
  torch::Tensor load_balance;    // scalar: Switch-style E * sum_e f_e * P_e (1 when balanced)
  torch::Tensor router_z;        // scalar: mean logsumexp(router logits)^2
  torch::Tensor expert_fraction; // [E]: fraction of routed (token, slot) pairs per expert, sums to 1
  torch::Tensor routes;          // [N, k] int64: experts chosen per token
  double dropped_fraction = 0;   // (token, slot) pairs past an expert's capacity
};

class MoELayerImpl : public torch::nn::Module {
 public:
  explicit MoELayerImpl(const MoEOptions& options);
  // x: [N, in]. Differentiable in x, router and experts. With
  // `forced_routes` ([N, k] int64, defined): those experts, not the top-k.
  MoEOutput forward(const torch::Tensor& x, const torch::Tensor& forced_routes = {});
  // Reference implementation: every token through every chosen expert one
  // at a time (tests compare the grouped path against it).
  torch::Tensor forward_reference(const torch::Tensor& x);
  // The expert MLP applied to rows x of expert e.
  torch::Tensor expert(std::int64_t e, const torch::Tensor& x) const;
  const MoEOptions& options() const { return options_; }

 private:
  MoEOptions options_;
  LinearMap router_map_{nullptr};  // a bias in RLX's own layouts, none in the Hugging Face families'
  torch::Tensor router_logits(const torch::Tensor& x);
  // x W[e] (+ its adapter's) for one of the experts' projections.
  torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b,
                        std::int64_t e) const;
  // y plus the adapter (a, b) of expert e's projection of x (y without one).
  torch::Tensor adapted(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& a, const torch::Tensor& b,
                        std::int64_t e) const;
  torch::Tensor w1_, b1_, w2_, b2_;  // [E,in,hidden] [E,hidden] [E,hidden,out] [E,out]
  torch::Tensor w_gate_, w_up_, w_down_;  // swiglu: [E,in,hidden] [E,in,hidden] [E,hidden,out]
  torch::Tensor s_gate_, s_up_, s_down_, s_weight_;  // the shared expert: [in,sh] [in,sh] [sh,out], its gate [in]
  torch::Tensor a_gate_, b_gate_, a_up_, b_up_, a_down_, b_down_;  // the experts' adapters (undefined without)
  torch::Tensor shared(const torch::Tensor& x) const;  // its gated output for rows x

 public:
  // swiglu: the router's weight [E, in] and expert e's projections as
  // Hugging Face lays them out ([out, in] views into this layer's
  // parameters: copying into one loads it).
  torch::Tensor router_weight() const { return router_map_->weight; }
  torch::Tensor gate_proj(std::int64_t e) const { return w_gate_[e].t(); }
  torch::Tensor up_proj(std::int64_t e) const { return w_up_[e].t(); }
  torch::Tensor down_proj(std::int64_t e) const { return w_down_[e].t(); }
  // The shared expert's projections and gate ([1, in]) likewise.
  torch::Tensor shared_gate_proj() const { return s_gate_.t(); }
  torch::Tensor shared_up_proj() const { return s_up_.t(); }
  torch::Tensor shared_down_proj() const { return s_down_.t(); }
  torch::Tensor shared_expert_gate() const { return s_weight_.unsqueeze(0); }
  // With an adapter: expert e's A and B as PEFT lays them out (lora_A
  // [rank, in], lora_B [out, rank]; views). which: 0 gate, 1 up, 2 down.
  bool adapted() const { return a_gate_.defined(); }
  torch::Tensor adapter_A(int which, std::int64_t e) const;
  torch::Tensor adapter_B(int which, std::int64_t e) const;
};
TORCH_MODULE(MoELayer);

// Seeds LibTorch's process-wide generator and holds it for a module's
// construction: initialisers draw from that one generator, so two threads
// building policies at once would interleave draws (and a learner's
// initial weights would depend on timing, breaking exact replay).
std::unique_lock<std::mutex> seeded_init(std::uint64_t seed);

}  // namespace rlx
