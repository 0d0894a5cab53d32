// The token policy: a decoder-only transformer whose feed-forward layers
// are MoE layers (policy/moe_layer.hpp), with a value head for token PPO.
//
//   x = tok_emb[t] + pos_emb[p]
//   per layer: x += attn(ln1(x));  x += moe(ln2(x))
//   logits = lm_head(ln_f(x)),  value = v_head(ln_f(x))
//   (with a copy head, logits = log of lm_head's distribution mixed with a
//   pointer at the context's tokens: policy/copy_head.hpp)
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
#include "policy/copy_head.hpp"
#include "policy/moe_layer.hpp"

namespace rlx {

// rlx: the layout above. qwen3_moe: the Qwen MoE families' (Hugging Face
// Qwen3MoeForCausalLM, and Qwen2MoeForCausalLM with `family` qwen2_moe):
// no position table but rotary embeddings on q and k, RMSNorm everywhere
// (Qwen3: on each head's q and k too), grouped-query attention (Qwen2:
// with biases on q, k and v), SwiGLU experts under a bias-free softmax
// top-k router (Qwen2: and a gated shared expert), an optional tied
// lm_head; RLX's value head beside it (policy/hf_checkpoint.hpp reads
// and writes the families' checkpoints).
enum class TransformerArch : std::uint8_t { rlx, qwen3_moe };
enum class HfFamily : std::uint8_t { qwen3_moe, qwen2_moe };

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
  TransformerArch arch = TransformerArch::rlx;
  bool copy_head = false;            // rlx only: logits mix in a pointer at the context (policy/copy_head.hpp)
  // qwen3_moe:
  std::int64_t kv_heads = 0;         // key/value heads (0: heads)
  std::int64_t head_dim = 0;         // 0: d_model / heads
  double rope_theta = 1e6;
  double rms_eps = 1e-6;
  bool norm_topk_prob = true;        // renormalise the top-k router probabilities
  bool tie_embeddings = false;       // lm_head shares the token embedding
  HfFamily family = HfFamily::qwen3_moe;  // qwen2_moe: q/k/v biases, no q/k norms, the shared expert
  std::int64_t shared_expert_hidden = 0;  // qwen2_moe: the shared expert's width (0: none)
  std::int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t head_width() const { return head_dim > 0 ? head_dim : d_model / heads; }
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
  CopyCache copy;                   // with a copy head only
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
  // qwen3_moe: every parameter under its Hugging Face name, as a view
  // shaped as the checkpoint holds it (policy/hf_checkpoint.cpp); the value
  // head is not among them.
  std::vector<std::pair<std::string, torch::Tensor>> hf_tensors() const;

 private:
  // One pass: keys/values of the new tokens go to `cache` when given.
  TransformerOutput run(const torch::Tensor& tokens, const torch::Tensor& valid, const torch::Tensor& positions,
                        const torch::Tensor& key_valid, std::int64_t offset, KVCache* cache,
                        const torch::Tensor& replay_routes);
  // One layer's attention block (its residual not added) for each arch.
  torch::Tensor attention(std::int64_t l, const torch::Tensor& x, const torch::Tensor& positions,
                          const torch::Tensor& allowed, std::int64_t offset, KVCache* cache);
  torch::Tensor norm(std::int64_t which, std::int64_t l, const torch::Tensor& x);  // 1: before attention, 2: before MoE, 0: final
  TransformerOptions options_;
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
  // qwen3_moe
  std::vector<torch::Tensor> in_norm_, post_norm_, q_norm_, k_norm_;  // q_norm_, k_norm_: Qwen3 only
  std::vector<torch::nn::Linear> q_, k_, v_, o_;
  torch::Tensor final_norm_;
  std::vector<torch::nn::LayerNorm> ln1_, ln2_;
  std::vector<torch::nn::Linear> qkv_, proj_;
  std::vector<MoELayer> moe_;
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear lm_head_{nullptr}, v_head_{nullptr};
  CopyHead copy_{nullptr};
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
