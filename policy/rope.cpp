#include "policy/rope.hpp"

#include <cmath>
#include <numbers>

#include "policy/low_precision.hpp"
#include "policy/moe_transformer.hpp"

namespace rlx {

torch::Tensor rope_inverse_frequencies(std::int64_t head_dim, double theta, const RopeScaling& s) {
  auto inv = torch::empty({head_dim / 2}, torch::kFloat64);
  auto* f = inv.data_ptr<double>();
  const double d = static_cast<double>(head_dim);
  for (std::int64_t i = 0; i < head_dim / 2; ++i) f[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / d);
  if (s.factor <= 0) return inv;
  // Llama 3: a wavelength longer than original / low_freq_factor is
  // divided by `factor`, one shorter than original / high_freq_factor is
  // kept, and those between are blended by where they fall.
  const double original = static_cast<double>(s.original_max_position);
  const double low_wavelength = original / s.low_freq_factor, high_wavelength = original / s.high_freq_factor;
  for (std::int64_t i = 0; i < head_dim / 2; ++i) {
    const double wavelength = 2 * std::numbers::pi / f[i];
    if (wavelength > low_wavelength) {
      f[i] /= s.factor;
    } else if (wavelength >= high_wavelength) {
      const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f[i] = (1 - smooth) * f[i] / s.factor + smooth * f[i];
    }
  }
  return inv;
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& inv) {
  // Angles, cosines and sines in fp32 at least (a bf16 angle is off by
  // whole turns at a few hundred positions), then in x's dtype.
  const auto type = wide(x).scalar_type();
  auto angles = positions.to(type).unsqueeze(-1) * inv.to(x.device(), type);  // [B, S, d/2]
  auto emb = torch::cat({angles, angles}, -1).unsqueeze(1);                   // [B, 1, S, d]
  auto half = x.chunk(2, -1);
  const auto cos = emb.cos().to(x.scalar_type()), sin = emb.sin().to(x.scalar_type());
  return x * cos + torch::cat({-half[1], half[0]}, -1) * sin;
}

}  // namespace rlx
