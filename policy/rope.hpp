// Rotary position embeddings as the Hugging Face decoder families apply
// them (the rotate-half form), with Llama 3's rescaled frequencies
// (RopeScaling in policy/moe_transformer.hpp). CAF-free.
#pragma once

#include <torch/torch.h>

namespace rlx {

struct RopeScaling;

// The head_dim / 2 inverse frequencies theta^(-2i/d), rescaled when
// `scaling.factor` > 0 (rope_type "llama3"), as float64 on the CPU.
torch::Tensor rope_inverse_frequencies(std::int64_t head_dim, double theta, const RopeScaling& scaling);

// x [B, H, S, d] rotated at positions [B, S] by the frequencies `inv` [d/2].
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& inv);

}  // namespace rlx
