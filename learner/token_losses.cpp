#include "learner/token_losses.hpp"

#include <limits>

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "learner/losses.hpp"

namespace rlx {

torch::Tensor grpo_advantages(const torch::Tensor& rewards, std::int64_t group_size, bool scale_by_std, double eps) {
  RLX_REQUIRE(group_size >= 1 && rewards.numel() % group_size == 0, rewards.numel(), group_size);
  auto r = rewards.to(torch::kFloat32).view({-1, group_size});
  auto centred = r - r.mean(1, true);
  if (scale_by_std && group_size > 1) centred = centred / (r.std(1, /*unbiased=*/true, true) + eps);
  // Exactly 0 for a group of equal rewards (a float mean can miss them by
  // an ulp, which the std scaling would blow up to ~1e-3).
  auto equal = std::get<0>(r.max(1, true)) == std::get<0>(r.min(1, true));
  return centred.masked_fill(equal, 0).reshape({-1});
}

torch::Tensor grpo_advantages_scored(const torch::Tensor& rewards, const torch::Tensor& scored, std::int64_t group_size,
                                     bool scale_by_std, double eps) {
  RLX_REQUIRE(group_size >= 1 && rewards.numel() % group_size == 0 && scored.numel() == rewards.numel(),
              rewards.numel(), scored.numel(), group_size);
  auto r = rewards.to(torch::kFloat32).view({-1, group_size});
  auto m = scored.to(torch::kBool).view({-1, group_size});
  auto mf = m.to(torch::kFloat32);
  auto n = mf.sum(1, true);
  auto mean = (r * mf).sum(1, true) / n.clamp_min(1);
  auto centred = (r - mean) * mf;
  if (scale_by_std) {
    auto std = (((r - mean) * mf).pow(2).sum(1, true) / (n - 1).clamp_min(1)).sqrt();
    centred = centred / (std + eps);
  }
  // Exactly 0 for a group whose scored rewards are all equal, and for a
  // group of fewer than two scored rows.
  const auto inf = std::numeric_limits<float>::infinity();
  auto equal = std::get<0>(r.masked_fill(~m, -inf).max(1, true)) == std::get<0>(r.masked_fill(~m, inf).min(1, true));
  return centred.masked_fill(equal | (n < 2), 0).masked_fill(~m, 0).reshape({-1});
}

torch::Tensor admit_tokens(const torch::Tensor& versions, const torch::Tensor& generated,
                           std::uint64_t learner_version, std::uint64_t max_lag) {
  const auto oldest = static_cast<std::int64_t>(learner_version > max_lag ? learner_version - max_lag : 0);
  return generated.to(torch::kBool) & (versions >= oldest);
}

torch::Tensor token_reference_kl(const torch::Tensor& new_log_probs, const torch::Tensor& reference_log_probs,
                                 const torch::Tensor& mask, std::int64_t tokens) {
  RLX_REQUIRE(tokens > 0, tokens);
  auto d = reference_log_probs - new_log_probs;
  auto k3 = (d.exp() - d - 1).clamp_max(10.0);
  return (k3 * mask.to(new_log_probs.dtype())).sum() / static_cast<double>(tokens);
}

torch::Tensor token_ppo_loss(const torch::Tensor& new_log_probs, const torch::Tensor& prox_log_probs,
                             const torch::Tensor& behaviour_log_probs, const torch::Tensor& advantages,
                             const torch::Tensor& mask, double clip, double rho_bar, LossStats* stats, bool decoupled) {
  auto m = mask.to(torch::kBool);
  auto pick = [&](const torch::Tensor& t) { return t.masked_select(m); };
  if (m.sum().item<std::int64_t>() == 0) return (new_log_probs * 0).sum();
  return decoupled_ppo_loss(pick(new_log_probs), pick(prox_log_probs), pick(behaviour_log_probs), pick(advantages),
                            clip, rho_bar, stats, {}, decoupled);
}

std::vector<std::vector<std::int64_t>> pack_by_length(const std::vector<std::int64_t>& lengths,
                                                      std::int64_t token_budget) {
  std::vector<std::int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<std::int64_t>> out;
  std::int64_t longest = 0;
  for (const auto i : order) {
    // Sorted longest first: the first row of a microbatch is its longest.
    if (out.empty() || static_cast<std::int64_t>(out.back().size() + 1) * longest > token_budget) {
      out.emplace_back();
      longest = lengths[i];
    }
    out.back().push_back(i);
  }
  return out;
}

}  // namespace rlx
