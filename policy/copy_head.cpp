#include "policy/copy_head.hpp"

#include <cmath>
#include <limits>

namespace rlx {

CopyHeadImpl::CopyHeadImpl(std::int64_t d_model) : d_(d_model) {
  q_ = register_module("q", torch::nn::Linear(d_model, d_model));
  k_ = register_module("k", torch::nn::Linear(d_model, d_model));
  gate_ = register_module("gate", torch::nn::Linear(d_model, 1));
  torch::NoGradGuard guard;
  gate_->weight.zero_();
  gate_->bias.fill_(kCopyGateBias);
}

CopyCache CopyHeadImpl::new_cache(std::int64_t batch, std::int64_t capacity, const torch::TensorOptions& options) const {
  CopyCache c;
  c.keys = torch::zeros({batch, capacity, d_}, options);
  c.tokens = torch::zeros({batch, capacity}, options.dtype(torch::kLong));
  c.last = torch::zeros({batch, d_}, options);
  return c;
}

void reset_copy_row(CopyCache& cache, std::int64_t row) {
  if (cache.defined()) cache.last[row].zero_();
}

void compact_copy_cache(CopyCache& cache, const torch::Tensor& idx, std::int64_t length) {
  if (!cache.defined()) return;
  const auto B = idx.size(0), live = idx.size(1), d = cache.keys.size(2);
  auto keys = cache.keys.narrow(1, 0, length).gather(1, idx.unsqueeze(-1).expand({B, live, d}));
  auto tokens = cache.tokens.narrow(1, 0, length).gather(1, idx);
  cache.keys.narrow(1, 0, live).copy_(keys);
  cache.tokens.narrow(1, 0, live).copy_(tokens);
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
  auto key_tokens = tokens;
  if (cache) {
    auto newest = std::get<0>(marked.max(1));  // [B]: the chunk's last real column, -1: none
    auto last = projected.gather(1, newest.clamp_min(0).view({B, 1, 1}).expand({B, 1, d_})).squeeze(1);
    cache->last.copy_(torch::where((newest >= 0).unsqueeze(-1), last, cache->last));
    cache->keys.narrow(1, offset, S).copy_(keys);
    cache->tokens.narrow(1, offset, S).copy_(tokens);
    keys = cache->keys.narrow(1, 0, L);
    key_tokens = cache->tokens.narrow(1, 0, L);
  }
  auto scores = torch::matmul(q_->forward(hidden), keys.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(d_)));
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());  // [B, S, L]
  auto pointed = torch::zeros({B, S, V}, logits.options())
                     .scatter_add(2, key_tokens.unsqueeze(1).expand({B, S, L}), torch::softmax(scores, -1));
  auto g = torch::sigmoid(gate_->forward(hidden));  // [B, S, 1]
  auto p = (1 - g) * torch::softmax(logits, -1) + g * pointed;
  return torch::log(p.clamp_min(1e-30));
}

}  // namespace rlx
