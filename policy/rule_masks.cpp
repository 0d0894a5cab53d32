#include "policy/rule_masks.hpp"

#include <cstring>

#include "core/error.hpp"

namespace rlx {

BlockedTokens BlockedTokens::to(const torch::Device& device) const {
  return empty() ? BlockedTokens{} : BlockedTokens{at.to(device), tokens.to(device)};
}

BlockedTokens blocked_columns(const TokenRule& rule, const torch::Tensor& tokens, const torch::Tensor& valid,
                              const torch::Tensor& generated) {
  RLX_REQUIRE(tokens.dim() == 2 && valid.sizes() == tokens.sizes() && generated.sizes() == tokens.sizes());
  const auto B = tokens.size(0), W = tokens.size(1), V = rule.vocab();
  auto tok_c = tokens.to(torch::kCPU, torch::kLong).contiguous();
  auto val_c = valid.to(torch::kCPU, torch::kBool).contiguous();
  auto gen_c = generated.to(torch::kCPU, torch::kBool).contiguous();
  auto tok = tok_c.accessor<std::int64_t, 2>();
  auto val = val_c.accessor<bool, 2>();
  auto gen = gen_c.accessor<bool, 2>();
  std::vector<std::int64_t> at;
  std::vector<std::uint8_t> rows, row;  // rows: at.size() x V
  for (std::int64_t b = 0; b < B; ++b) {
    auto state = rule.start();
    for (std::int64_t j = 0; j < W; ++j) {
      if (!val[b][j]) continue;
      // Column 0 is predicted by nothing: no logits to mask.
      if (j > 0 && gen[b][j] && state->blocked(row)) {
        RLX_REQUIRE(static_cast<std::int64_t>(row.size()) == V, row.size(), V);
        at.push_back(b * W + j);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      state->push(tok[b][j], gen[b][j]);
    }
  }
  if (at.empty()) return {};
  const auto N = static_cast<std::int64_t>(at.size());
  return {torch::tensor(at, torch::kLong),
          torch::from_blob(rows.data(), {N, V}, torch::kUInt8).to(torch::kBool)};  // to(): a copy, owning its data
}

torch::Tensor predicting(const torch::Tensor& logits, const BlockedTokens& blocked) {
  RLX_REQUIRE(logits.dim() == 3, logits.dim());
  const auto B = logits.size(0), W = logits.size(1), V = logits.size(2);
  if (blocked.empty()) return logits.narrow(1, 0, W - 1);
  // Column j is predicted by column j - 1 of its row.
  const auto by = blocked.at - 1;
  auto flat = logits.reshape({B * W, V});
  auto hit = flat.index_select(0, by).masked_fill(blocked.tokens, kBlockedLogit);
  return flat.index_copy(0, by, hit).view({B, W, V}).narrow(1, 0, W - 1);
}

torch::Tensor apply_rule(const torch::Tensor& logits, const std::vector<const TokenRule::State*>& states) {
  RLX_REQUIRE(logits.dim() == 2 && static_cast<std::int64_t>(states.size()) == logits.size(0), states.size());
  const auto V = logits.size(1);
  torch::Tensor mask;
  std::vector<std::uint8_t> row;
  for (std::size_t b = 0; b < states.size(); ++b) {
    if (states[b] == nullptr || !states[b]->blocked(row)) continue;
    RLX_REQUIRE(static_cast<std::int64_t>(row.size()) == V, row.size(), V);
    if (!mask.defined()) mask = torch::zeros({logits.size(0), V}, torch::kBool);
    std::memcpy(mask[static_cast<std::int64_t>(b)].data_ptr<bool>(), row.data(), static_cast<std::size_t>(V));
  }
  if (!mask.defined()) return logits;
  return logits.to(torch::kFloat32).masked_fill(mask.to(logits.device()), kBlockedLogit);
}

}  // namespace rlx
