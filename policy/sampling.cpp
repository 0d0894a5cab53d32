#include "policy/sampling.hpp"

#include <cmath>

namespace rlx {

Sampled sample_categorical(const torch::Tensor& logits, std::mt19937_64& rng, bool greedy) {
  auto logp = torch::log_softmax(logits.to(torch::kFloat32), -1).contiguous();
  const auto N = logp.size(0), A = logp.size(1);
  const float* lp = logp.data_ptr<float>();
  Sampled out;
  out.actions.resize(N);
  out.log_probs.resize(N);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::int64_t i = 0; i < N; ++i) {
    const float* row = lp + i * A;
    std::int64_t a = 0;
    if (greedy) {
      for (std::int64_t j = 1; j < A; ++j)
        if (row[j] > row[a]) a = j;
    } else {
      double r = u(rng), acc = 0.0;
      a = A - 1;
      for (std::int64_t j = 0; j < A; ++j) {
        acc += std::exp(static_cast<double>(row[j]));
        if (r < acc) {
          a = j;
          break;
        }
      }
    }
    out.actions[i] = a;
    out.log_probs[i] = row[a];
  }
  return out;
}

}  // namespace rlx
