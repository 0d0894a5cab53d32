#include "policy/copy_head.hpp"

#include <cmath>
#include <limits>

namespace rlx {

CopyHeadImpl::CopyHeadImpl(std::int64_t d_model) : d_(d_model) {
  q_ = register_module("q", torch::nn::Linear(d_model, d_model));
  k_ = register_module("k", torch::nn::Linear(d_model, d_model));
  gate_ = register_module("gate", torch::nn::Linear(d_model, 1));
  match_ = register_parameter("match", torch::tensor({kCopyMatch1, kCopyMatch2}, torch::kFloat32));
  torch::NoGradGuard guard;
  gate_->weight.zero_();
  gate_->bias.fill_(kCopyGateBias);
}

CopyCache CopyHeadImpl::new_cache(std::int64_t batch, std::int64_t capacity, const torch::TensorOptions& options) const {
  CopyCache c;
  c.keys = torch::zeros({batch, capacity, d_}, options);
  c.tokens = torch::zeros({batch, capacity}, options.dtype(torch::kLong));
  c.before = torch::full({batch, capacity, 2}, -1, options.dtype(torch::kLong));
  c.last = torch::zeros({batch, d_}, options);
  c.recent = torch::full({batch, 2}, -1, options.dtype(torch::kLong));
  return c;
}

void reset_copy_row(CopyCache& cache, std::int64_t row) {
  if (!cache.defined()) return;
  cache.last[row].zero_();
  cache.recent[row].fill_(-1);
}

void compact_copy_cache(CopyCache& cache, const torch::Tensor& idx, std::int64_t length) {
  if (!cache.defined()) return;
  const auto B = idx.size(0), live = idx.size(1), d = cache.keys.size(2);
  auto keys = cache.keys.narrow(1, 0, length).gather(1, idx.unsqueeze(-1).expand({B, live, d}));
  auto tokens = cache.tokens.narrow(1, 0, length).gather(1, idx);
  auto before = cache.before.narrow(1, 0, length).gather(1, idx.unsqueeze(-1).expand({B, live, 2}));
  cache.keys.narrow(1, 0, live).copy_(keys);
  cache.tokens.narrow(1, 0, live).copy_(tokens);
  cache.before.narrow(1, 0, live).copy_(before);
}

torch::Tensor CopyHeadImpl::mix(const torch::Tensor& logits, const torch::Tensor& hidden, const torch::Tensor& tokens,
                                const torch::Tensor& valid, const torch::Tensor& allowed, std::int64_t offset,
                                CopyCache* cache) {
  const auto B = tokens.size(0), S = tokens.size(1), L = offset + S, V = logits.size(-1);
  auto projected = k_->forward(hidden);  // [B, S, d]: the key of the token after each
  // Each column's key comes from the row's real token before it: in this
  // chunk (the newest earlier real column) or, before the chunk's first,
  // the one the cache carried (zero for a row's first token).
  auto real = valid.to(torch::kBool);
  auto col = torch::arange(S, tokens.options().dtype(torch::kLong)).unsqueeze(0).expand({B, S});
  auto marked = torch::where(real, col, torch::full_like(col, -1));
  auto before = std::get<0>(torch::cat({torch::full({B, 1}, -1, col.options()), marked.narrow(1, 0, S - 1)}, 1).cummax(1));
  auto from_chunk = projected.gather(1, before.clamp_min(0).unsqueeze(-1).expand({B, S, d_}));
  auto carried = cache ? cache->last.unsqueeze(1).expand({B, S, d_}) : torch::zeros_like(from_chunk);
  auto keys = torch::where((before >= 0).unsqueeze(-1), from_chunk, carried);
  // The two real tokens before each column, from this chunk or those the cache carried.
  auto none = torch::full({B, 2}, -1, col.options());
  auto recent = (cache ? cache->recent : none).unsqueeze(1).expand({B, S, 2});
  auto token_at = [&](const torch::Tensor& i, const torch::Tensor& otherwise) {
    return torch::where(i >= 0, tokens.gather(1, i.clamp_min(0)), otherwise);
  };
  auto before2 = torch::where(before >= 0, before.gather(1, before.clamp_min(0)), before);
  auto prev1 = token_at(before, recent.select(2, 0));
  auto prev2 = torch::where(before >= 0, token_at(before2, recent.select(2, 0)), recent.select(2, 1));
  auto key_before = torch::stack({prev1, prev2}, 2);  // [B, S, 2]
  auto key_tokens = tokens;
  if (cache) {
    auto newest = std::get<0>(marked.max(1));  // [B]: the chunk's last real column, -1: none
    auto at_newest = [&](const torch::Tensor& t) {
      return t.gather(1, newest.clamp_min(0).view({B, 1, 1}).expand({B, 1, t.size(2)})).squeeze(1);
    };
    auto found = (newest >= 0).unsqueeze(-1);
    cache->last.copy_(torch::where(found, at_newest(projected), cache->last));
    auto newest_two = torch::stack({tokens.gather(1, newest.clamp_min(0).unsqueeze(1)).squeeze(1),
                                    prev1.gather(1, newest.clamp_min(0).unsqueeze(1)).squeeze(1)}, 1);
    cache->recent.copy_(torch::where(found, newest_two, cache->recent));
    cache->keys.narrow(1, offset, S).copy_(keys);
    cache->tokens.narrow(1, offset, S).copy_(tokens);
    cache->before.narrow(1, offset, S).copy_(key_before);
    keys = cache->keys.narrow(1, 0, L);
    key_tokens = cache->tokens.narrow(1, 0, L);
    key_before = cache->before.narrow(1, 0, L);
  }
  auto scores = torch::matmul(q_->forward(hidden), keys.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(d_)));
  // Match terms: the query at t wrote tokens[t] after prev1[t]; column j
  // continues them when the tokens before it are the same.
  auto one = key_before.select(2, 0).unsqueeze(1) == tokens.unsqueeze(2);  // [B, S, L]
  auto two = one.logical_and(key_before.select(2, 1).unsqueeze(1) == prev1.unsqueeze(2))
                 .logical_and((prev1 >= 0).unsqueeze(2));
  scores = scores + match_[0] * one.to(scores.dtype()) + match_[1] * two.to(scores.dtype());
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());  // [B, S, L]
  auto pointed = torch::zeros({B, S, V}, logits.options())
                     .scatter_add(2, key_tokens.unsqueeze(1).expand({B, S, L}), torch::softmax(scores, -1));
  auto g = torch::sigmoid(gate_->forward(hidden));  // [B, S, 1]
  auto p = (1 - g) * torch::softmax(logits, -1) + g * pointed;
  return torch::log(p.clamp_min(1e-30));
}

}  // namespace rlx
