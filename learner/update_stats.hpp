// What one learner update reports (plain data, no LibTorch).
#pragma once

#include <cstdint>
#include <vector>

namespace rlx {

// The off-policy correction's statistics over a batch.
struct LossStats {
  double ratio_mean = 0;          // mean behaviour ratio pi_prox / pi_behaviour (before truncation)
  double ratio_max = 0;           // its maximum
  double truncated_fraction = 0;  // fraction of behaviour ratios above rho_bar
};

struct UpdateStats {
  double policy_loss = 0;
  double value_loss = 0;
  double entropy = 0;
  double load_balance = 0;
  std::vector<float> expert_utilisation;
  LossStats correction;
  std::uint64_t steps = 0;   // env steps in the batch
  // The token policy: how often the learner's own routing differs from
  // the routes the rollout recorded, and tokens past the staleness bound.
  double route_mismatch = 0;
  std::uint64_t stale_tokens = 0;
  // Textual feedback: the hint distillation's KL and the rows it used.
  double hint_kl = 0;
  double reference_kl = 0;  // token policy: KL(policy || start) per trained token, before the step
  // Token policy: mean |log p learner - log p sampler| over the tokens the
  // explorers sampled with the very weights the learner holds before the
  // step (lag 0): what computing them apart costs (bf16, batching), not
  // staleness. 0 when no such token came.
  double sampler_mismatch = 0;
  std::uint64_t hinted_rows = 0;
  std::uint64_t skipped_rows = 0;  // rows of zero advantage, not computed (GRPO)
};

}  // namespace rlx
