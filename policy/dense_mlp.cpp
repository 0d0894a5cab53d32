#include "policy/dense_mlp.hpp"

namespace rlx {

SwiGluMlpImpl::SwiGluMlpImpl(std::int64_t width, std::int64_t hidden, bool draw,
                             const std::array<Adapter, 3>& adapters) {
  gate_ = register_module("gate_proj", LinearMap(width, hidden, false, draw, adapters[0]));
  up_ = register_module("up_proj", LinearMap(width, hidden, false, draw, adapters[1]));
  down_ = register_module("down_proj", LinearMap(hidden, width, false, draw, adapters[2]));
}

torch::Tensor SwiGluMlpImpl::forward(const torch::Tensor& x) {
  return down_->forward(torch::silu(gate_->forward(x)) * up_->forward(x));
}

}  // namespace rlx
