// The learner's learning-rate schedule: a linear warm-up over the first
// updates of a run, then the configured rate. CAF-free.
#pragma once

#include <algorithm>
#include <cstdint>

#include <torch/torch.h>

namespace rlx {

// The rate of update `update` (0-based: the learner's version before it):
// lr * (update + 1) / warmup for the first `warmup` updates, lr after
// (warmup 0 or 1: lr throughout).
inline double warmup_lr(double lr, std::int64_t warmup, std::uint64_t update) {
  if (warmup <= 1) return lr;
  const double f = static_cast<double>(update + 1) / static_cast<double>(warmup);
  return lr * std::min(1.0, f);
}

inline void set_lr(torch::optim::Adam& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

}  // namespace rlx
