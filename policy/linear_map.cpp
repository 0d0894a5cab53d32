#include "policy/linear_map.hpp"

#include <cmath>

namespace rlx {

LinearMapImpl::LinearMapImpl(std::int64_t in, std::int64_t out, bool with_bias, bool draw) {
  weight = register_parameter("weight", torch::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", torch::empty({out}));
  if (!draw) return;
  torch::NoGradGuard guard;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight.uniform_(-bound, bound);
  if (with_bias) bias.uniform_(-bound, bound);
}

torch::Tensor LinearMapImpl::forward(const torch::Tensor& x) const {
  return torch::nn::functional::linear(x, weight, bias);
}

}  // namespace rlx
