// A linear map y = x W^T (+ b) whose parameters are named as
// torch::nn::Linear's ("weight" [out, in], "bias" [out]) and drawn only
// when asked: a model about to be filled from a checkpoint or a weight
// set allocates them (untouched pages cost no memory) and draws nothing
// it would then overwrite. Drawn, they are what torch::nn::Linear draws:
// uniform in +-1/sqrt(in). CAF-free.
//
// With an adapter (LoRA, policy/lora.hpp) the map is
//   y = x W^T (+ b) + scaling * (x A^T) B^T,  A [rank, in], B [out, rank]
// A drawn as W would be (PEFT's default), B zero: a fresh adapter changes
// nothing. A frozen map holds W and b as buffers, not parameters: no
// gradient, no optimizer state, not in a weight set (only A and B are).
#pragma once

#include <torch/torch.h>

namespace rlx {

struct Adapter {
  std::int64_t rank = 0;  // 0: none
  double scaling = 0;     // alpha / rank
  bool frozen = false;    // the base weights are buffers (with or without an adapter here)
};

class LinearMapImpl : public torch::nn::Module {
 public:
  LinearMapImpl(std::int64_t in, std::int64_t out, bool bias, bool draw, const Adapter& adapter = {});
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;  // bias undefined without one
  torch::Tensor lora_A, lora_B;  // undefined without an adapter
  double scaling = 0;
};
TORCH_MODULE(LinearMap);

// RLX's own layout's embedding table ("weight" [n, d], drawn as
// torch::nn::Embedding draws it: standard normal) and layer norm ("weight"
// ones, "bias" zeros, eps 1e-5), held as buffers when `frozen` (the base
// of a LoRA policy) and as parameters otherwise.
class EmbeddingMapImpl : public torch::nn::Module {
 public:
  EmbeddingMapImpl(std::int64_t n, std::int64_t d, bool frozen);
  torch::Tensor forward(const torch::Tensor& ids) const;
  torch::Tensor weight;
};
TORCH_MODULE(EmbeddingMap);

class LayerNormMapImpl : public torch::nn::Module {
 public:
  LayerNormMapImpl(std::int64_t d, bool frozen);
  torch::Tensor forward(const torch::Tensor& x) const;
  torch::Tensor weight, bias;
};
TORCH_MODULE(LayerNormMap);

}  // namespace rlx
