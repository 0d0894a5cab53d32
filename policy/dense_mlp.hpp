// The dense feed-forward layer of the Hugging Face decoder families
// (Qwen2/Qwen2.5, Qwen3, Llama 3; the dense layers of Qwen3-MoE and
// Qwen2-MoE): down(silu(gate(x)) * up(x)), no biases, its weights laid
// out as the checkpoints hold them ([out, in]); drawn only when `draw`
// (policy/linear_map.hpp).
#pragma once

#include <torch/torch.h>

#include "policy/linear_map.hpp"

namespace rlx {

class SwiGluMlpImpl : public torch::nn::Module {
 public:
  SwiGluMlpImpl(std::int64_t width, std::int64_t hidden, bool draw);
  torch::Tensor forward(const torch::Tensor& x);             // [..., width] -> [..., width]
  torch::Tensor gate_proj() const { return gate_->weight; }  // [hidden, width]
  torch::Tensor up_proj() const { return up_->weight; }      // [hidden, width]
  torch::Tensor down_proj() const { return down_->weight; }  // [width, hidden]

 private:
  LinearMap gate_{nullptr}, up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(SwiGluMlp);

}  // namespace rlx
