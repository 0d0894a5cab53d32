// The dense feed-forward layer of the Hugging Face decoder families
// (Qwen2/Qwen2.5, Qwen3, Llama 3; the dense layers of Qwen3-MoE and
// Qwen2-MoE): down(silu(gate(x)) * up(x)), no biases, its weights laid
// out as the checkpoints hold them ([out, in]); drawn only when `draw`
// (policy/linear_map.hpp).
#pragma once

#include <torch/torch.h>

#include <array>

#include "policy/linear_map.hpp"

namespace rlx {

class SwiGluMlpImpl : public torch::nn::Module {
 public:
  // adapters: gate, up, down's (policy/linear_map.hpp; none by default).
  SwiGluMlpImpl(std::int64_t width, std::int64_t hidden, bool draw, const std::array<Adapter, 3>& adapters = {});
  torch::Tensor forward(const torch::Tensor& x);             // [..., width] -> [..., width]
  torch::Tensor gate_proj() const { return gate_->weight; }  // [hidden, width]
  torch::Tensor up_proj() const { return up_->weight; }      // [hidden, width]
  torch::Tensor down_proj() const { return down_->weight; }  // [width, hidden]
  const LinearMap& map(int which) const {
    return which == 0 ? gate_ : which == 1 ? up_ : down_;
  }  // 0 gate, 1 up, 2 down

 private:
  LinearMap gate_{nullptr}, up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(SwiGluMlp);

}  // namespace rlx
