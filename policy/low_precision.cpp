#include "policy/low_precision.hpp"

#include <ATen/autocast_mode.h>

namespace rlx {

LowPrecision::LowPrecision(bool on, const torch::Device& device) : on_(on), cuda_(device.is_cuda()) {
  if (!on_) return;
  if (cuda_) {
    was_enabled_ = at::autocast::is_enabled();
    was_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
  } else {
    was_enabled_ = at::autocast::is_cpu_enabled();
    was_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  }
  at::autocast::increment_nesting();
}

LowPrecision::~LowPrecision() {
  if (!on_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(was_dtype_);
  } else {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
}

torch::Tensor wide(const torch::Tensor& t) {
  const auto type = t.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? t.to(torch::kFloat32) : t;
}

}  // namespace rlx
