// supervised_rows (learner/token_trainer.hpp): (prompt, completion) pairs
// left-padded into one batch with the mask of the tokens to predict.
#include <algorithm>

#include "core/error.hpp"
#include "learner/token_trainer.hpp"

namespace rlx {

SupervisedRows supervised_rows(const std::vector<std::vector<std::int64_t>>& prompts,
                               const std::vector<std::vector<std::int64_t>>& completions, std::int64_t pad,
                               std::int64_t eos, const std::vector<std::vector<std::uint8_t>>& observed) {
  RLX_REQUIRE(!prompts.empty() && prompts.size() == completions.size(), prompts.size(), completions.size());
  RLX_REQUIRE(observed.empty() || observed.size() == completions.size(), observed.size(), completions.size());
  const auto B = static_cast<std::int64_t>(prompts.size());
  const std::int64_t tail = observed.empty() ? 1 : 0;  // a transcript ends with its last turn, no eos
  std::int64_t P = 0, C = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    RLX_REQUIRE(observed.empty() || observed[b].size() == completions[b].size(), b);
    P = std::max<std::int64_t>(P, static_cast<std::int64_t>(prompts[b].size()));
    C = std::max<std::int64_t>(C, static_cast<std::int64_t>(completions[b].size()) + tail);
  }
  SupervisedRows r;
  r.tokens = torch::full({B, P + C}, pad, torch::kLong);
  r.valid = torch::zeros({B, P + C}, torch::kBool);
  r.targets = torch::zeros({B, P + C}, torch::kBool);
  auto tok = r.tokens.accessor<std::int64_t, 2>();
  auto val = r.valid.accessor<bool, 2>();
  auto tgt = r.targets.accessor<bool, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto n = static_cast<std::int64_t>(prompts[b].size());
    for (std::int64_t i = 0; i < n; ++i) tok[b][P - n + i] = prompts[b][i], val[b][P - n + i] = true;
    const auto& c = completions[b];
    const auto n_c = static_cast<std::int64_t>(c.size());
    // Completions are left-aligned after the prompt and padded after their end.
    for (std::int64_t i = 0; i < n_c + tail; ++i) {
      tok[b][P + i] = i < n_c ? c[i] : eos;
      val[b][P + i] = true;
      tgt[b][P + i] = observed.empty() || i >= n_c || !observed[b][i];
    }
  }
  return r;
}

}  // namespace rlx
