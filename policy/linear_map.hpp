// A linear map y = x W^T (+ b) whose parameters are named as
// torch::nn::Linear's ("weight" [out, in], "bias" [out]) and drawn only
// when asked: a model about to be filled from a checkpoint or a weight
// set allocates them (untouched pages cost no memory) and draws nothing
// it would then overwrite. Drawn, they are what torch::nn::Linear draws:
// uniform in +-1/sqrt(in). CAF-free.
#pragma once

#include <torch/torch.h>

namespace rlx {

class LinearMapImpl : public torch::nn::Module {
 public:
  LinearMapImpl(std::int64_t in, std::int64_t out, bool bias, bool draw);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;  // bias undefined without one
};
TORCH_MODULE(LinearMap);

}  // namespace rlx
