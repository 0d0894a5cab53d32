// Sampling discrete actions from logits with a caller-owned RNG, so every
// explorer's choices are reproducible from its seed.
#pragma once

#include <random>
#include <vector>

#include <torch/torch.h>

namespace rlx {

struct Sampled {
  std::vector<std::int64_t> actions;  // [N]
  std::vector<float> log_probs;       // [N]: log pi(action)
};

// logits: [N, A] float32 on CPU. Greedy picks the argmax.
Sampled sample_categorical(const torch::Tensor& logits, std::mt19937_64& rng, bool greedy = false);

}  // namespace rlx
