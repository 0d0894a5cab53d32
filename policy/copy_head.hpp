// A copy head: the token policy may emit a token by pointing at its place
// in the context, so a name it has never been trained to write (a held-out
// task's `align_tides`) is as easy to write as one it has. The pointer-
// generator mixture (See et al. 2017) in its induction form:
//
//   key_j   = W_k h_prev(j)      the hidden state of the real token before j
//                                (zero for a row's first token)
//   query_t = W_q h_t
//   a_t     = softmax_j(query_t . key_j / sqrt(d))   over real j <= t
//   copy_t(v) = sum of a_tj over the j whose token is v
//   g_t     = sigmoid(w_g . h_t + b_g)
//   p_t     = (1 - g_t) softmax(logits_t) + g_t copy_t
//
// so the token that followed the place whose context matches "what I just
// wrote" is the one copied. The head returns log p_t as the policy's
// logits: every consumer (sampler, learner, temperature) reads them with
// log_softmax, which leaves them as they are, so log-probabilities agree
// between explorer and learner with nothing else changed.
//
// Decoding keeps each row's keys and tokens in the KV cache (CopyCache),
// and the newest real token's key-to-be, so a step computes exactly what
// a pass over the whole sequence does.
#pragma once

#include <torch/torch.h>

namespace rlx {

// The gate's starting bias: 0.047 of the mass on the pointer, so a start
// trained without the head keeps its distribution (its first step's loss
// rises 0.04 per token, at -1 it rose 0.27) while Adam moves the head as
// fast whatever the gate. On the agent workload the gate opens from there
// (docs/results/agent-workload.md "A copy head"); on the toy task of
// tests/policy/copy_head_test.cpp, where the vocabulary head learns the
// training tokens first, it does not, and the test starts it at -1.
inline constexpr double kCopyGateBias = -3.0;

// Per row of a KV cache (policy/moe_transformer.hpp), for a policy with a copy head.
struct CopyCache {
  torch::Tensor keys;    // [B, capacity, d]: column j's key (from the real token before it)
  torch::Tensor tokens;  // [B, capacity] int64: column j's token
  torch::Tensor last;    // [B, d]: W_k h of each row's newest real token (zero: none yet)
  bool defined() const { return keys.defined(); }
};

class CopyHeadImpl : public torch::nn::Module {
 public:
  // The gate starts at sigmoid(kCopyGateBias) at every state.
  explicit CopyHeadImpl(std::int64_t d_model);

  // The mixture's log-probabilities [B, S, V] for the vocabulary head's
  // `logits` [B, S, V] at `hidden` [B, S, d] of `tokens`/`valid` [B, S],
  // which sit at columns offset..offset+S-1 of a cache (offset 0 and no
  // cache: the whole sequence). allowed [B, S, offset + S]: the columns
  // each query may read (the attention's mask). With `cache`, the new
  // columns' keys and tokens are written into it.
  torch::Tensor mix(const torch::Tensor& logits, const torch::Tensor& hidden, const torch::Tensor& tokens,
                    const torch::Tensor& valid, const torch::Tensor& allowed, std::int64_t offset, CopyCache* cache);

  CopyCache new_cache(std::int64_t batch, std::int64_t capacity, const torch::TensorOptions& options) const;

 private:
  std::int64_t d_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, gate_{nullptr};
};
TORCH_MODULE(CopyHead);

// Starts `row` over (its next token has no predecessor).
void reset_copy_row(CopyCache& cache, std::int64_t row);
// Keeps columns idx [B, live] of every row in the first `live` columns (compact_cache).
void compact_copy_cache(CopyCache& cache, const torch::Tensor& idx, std::int64_t length);

}  // namespace rlx
