// Computing in bf16. A module whose parameters are bf16 (an explorer's,
// the evaluator's, the gateway's policy with [policy] dtype = "bf16")
// computes in bf16 by itself; one whose parameters are fp32 master
// weights (the learner's) computes its forward inside LowPrecision:
// LibTorch's autocast, which runs matrix products (linear, matmul, bmm)
// in bf16 on rounded copies of the weights, the same rounding a weight
// set's bf16 tensors get, and leaves elementwise work in the dtype of its
// inputs. Backward follows the forward's dtypes; the gradients reach the
// fp32 parameters in fp32. Where reductions must not lose precision
// (norms, softmaxes, log-probabilities) the model widens to fp32 itself
// (wide()).
#pragma once

#include <torch/torch.h>

namespace rlx {

// bf16 autocast on `device`'s kind (CPU or CUDA) for this thread while it
// lives, when `on`; nothing otherwise. Nests; the cast weights are let go
// when the outermost one ends.
class LowPrecision {
 public:
  LowPrecision(bool on, const torch::Device& device);
  ~LowPrecision();
  LowPrecision(const LowPrecision&) = delete;
  LowPrecision& operator=(const LowPrecision&) = delete;

 private:
  bool on_ = false, cuda_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// `t` in fp32 when it is of a narrower floating type (bf16, fp16); as it
// is otherwise (fp32, fp64, integers): no copy.
torch::Tensor wide(const torch::Tensor& t);

}  // namespace rlx
