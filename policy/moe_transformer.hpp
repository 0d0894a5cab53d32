// The token policy: a decoder-only transformer whose feed-forward layers
// are MoE layers (policy/moe_layer.hpp), with a value head for token PPO.
//
//   x = tok_emb[t] + pos_emb[p]
//   per layer: x += attn(ln1(x));  x += moe(ln2(x))
//   logits = lm_head(ln_f(x)),  value = v_head(ln_f(x))
//
// Sequences are left-padded: `valid` marks real tokens, a padded key is
// never attended to and positions count real tokens only, so a prompt
// reads the same whatever its padding. Decoding is incremental through a
// KV cache (step()), batched over every row; forward() is the same
// computation over whole sequences at once (the learner's path, with
// gradients). Every MoE layer's routes are returned per token, and
// forward() can replay recorded routes (router replay).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "core/config.hpp"
#include "policy/moe_layer.hpp"

namespace rlx {

// The defaults are the code policy's (envs/tokens: 99 characters).
struct TransformerOptions {
  std::int64_t vocab = 99;
  std::int64_t d_model = 128;
  std::int64_t heads = 4;
  std::int64_t layers = 2;
  std::int64_t max_len = 256;        // positions (prompt + completion)
  std::int64_t experts = 4;
  std::int64_t top_k = 2;
  std::int64_t expert_hidden = 256;
  double capacity_factor = 0;        // 0: no token dropped
};

struct TransformerOutput {
  torch::Tensor logits;           // [B, S, V]
  torch::Tensor values;           // [B, S]
  torch::Tensor routes;           // [layers, B, S, k] int64
  torch::Tensor load_balance;     // scalar, mean over layers (1 when balanced)
  torch::Tensor router_z;         // scalar, mean over layers
  torch::Tensor expert_fraction;  // [layers, E]
  double dropped_fraction = 0;    // mean over layers
};

// Keys and values of every layer for B rows, preallocated to `capacity`
// positions; `length` of them are filled (the same for every row: rows
// are left-padded, and a finished row goes on with padding).
struct KVCache {
  std::vector<torch::Tensor> k, v;  // per layer [B, H, capacity, d_head]
  torch::Tensor valid;              // [B, capacity] bool
  torch::Tensor next_position;      // [B] int64: the position of each row's next real token
  std::int64_t length = 0;
  std::int64_t capacity = 0;
};

// Starts `row` over: none of its keys is attended to again and its
// positions count from 0 (continuous batching: the row takes a new sequence).
void reset_cache_row(KVCache& cache, std::int64_t row);
// Moves every row's valid keys together at the end of the first columns,
// in order, and drops the rest: the cache then holds as many columns as
// the row with the most keys. Attention and positions are unchanged.
void compact_cache(KVCache& cache);

class MoETransformerImpl : public torch::nn::Module {
 public:
  explicit MoETransformerImpl(const TransformerOptions& options);

  // tokens, valid: [B, S]. With `replay_routes` ([layers, B, S, k],
  // defined) every MoE layer uses those experts.
  TransformerOutput forward(const torch::Tensor& tokens, const torch::Tensor& valid,
                            const torch::Tensor& replay_routes = {});

  KVCache new_cache(std::int64_t batch, std::int64_t capacity) const;
  // Appends tokens/valid ([B, S]) to `cache` and returns their outputs
  // (no gradient: the sampler's path). REQUIRES: cache.length + S <= capacity.
  TransformerOutput step(const torch::Tensor& tokens, const torch::Tensor& valid, KVCache& cache);

  const TransformerOptions& options() const { return options_; }

 private:
  // One pass: keys/values of the new tokens go to `cache` when given.
  TransformerOutput run(const torch::Tensor& tokens, const torch::Tensor& valid, const torch::Tensor& positions,
                        const torch::Tensor& key_valid, std::int64_t offset, KVCache* cache,
                        const torch::Tensor& replay_routes);
  TransformerOptions options_;
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
  std::vector<torch::nn::LayerNorm> ln1_, ln2_;
  std::vector<torch::nn::Linear> qkv_, proj_;
  std::vector<MoELayer> moe_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear lm_head_{nullptr}, v_head_{nullptr};
};
TORCH_MODULE(MoETransformer);

// The shape a [policy] table names, for a vocabulary of `vocab` tokens.
TransformerOptions transformer_options(const PolicyConfig& policy, std::int64_t vocab);

// Built from `seed` alone (serialised like make_seeded_policy).
MoETransformer make_seeded_transformer(const TransformerOptions& options, std::uint64_t seed);

// Positions of left-padded rows: the count of real tokens before each one
// (0 for padding). valid: [B, S] bool -> [B, S] int64.
torch::Tensor positions_of(const torch::Tensor& valid);

// Of the real tokens (`valid` [B, S]) of every layer, the fraction whose
// expert set in `a` differs from the set in `b` (both [layers, B, S, k]).
double route_mismatch(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& valid);

}  // namespace rlx
