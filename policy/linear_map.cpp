#include "policy/linear_map.hpp"

#include <cmath>

namespace rlx {

LinearMapImpl::LinearMapImpl(std::int64_t in, std::int64_t out, bool with_bias, bool draw, const Adapter& adapter)
    : scaling(adapter.scaling) {
  const auto hold = [&](const char* name, torch::Tensor t) {
    return adapter.frozen ? register_buffer(name, std::move(t)) : register_parameter(name, std::move(t));
  };
  weight = hold("weight", torch::empty({out, in}));
  if (with_bias) bias = hold("bias", torch::empty({out}));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  torch::NoGradGuard guard;
  if (adapter.rank > 0) {  // always drawn: no checkpoint of the base holds it
    lora_A = register_parameter("lora_A", torch::empty({adapter.rank, in}).uniform_(-bound, bound));
    lora_B = register_parameter("lora_B", torch::zeros({out, adapter.rank}));
  }
  if (!draw) return;
  weight.uniform_(-bound, bound);
  if (with_bias) bias.uniform_(-bound, bound);
}

torch::Tensor LinearMapImpl::forward(const torch::Tensor& x) const {
  auto y = torch::nn::functional::linear(x, weight, bias);
  if (!lora_A.defined()) return y;
  return y + torch::nn::functional::linear(torch::nn::functional::linear(x, lora_A), lora_B) * scaling;
}

namespace {

torch::Tensor held(torch::nn::Module& m, const char* name, torch::Tensor t, bool frozen) {
  return frozen ? m.register_buffer(name, std::move(t)) : m.register_parameter(name, std::move(t));
}

}  // namespace

EmbeddingMapImpl::EmbeddingMapImpl(std::int64_t n, std::int64_t d, bool frozen) {
  torch::NoGradGuard guard;
  weight = held(*this, "weight", torch::empty({n, d}).normal_(), frozen);
}

torch::Tensor EmbeddingMapImpl::forward(const torch::Tensor& ids) const { return torch::embedding(weight, ids); }

LayerNormMapImpl::LayerNormMapImpl(std::int64_t d, bool frozen) {
  weight = held(*this, "weight", torch::ones({d}), frozen);
  bias = held(*this, "bias", torch::zeros({d}), frozen);
}

torch::Tensor LayerNormMapImpl::forward(const torch::Tensor& x) const {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
}

}  // namespace rlx
