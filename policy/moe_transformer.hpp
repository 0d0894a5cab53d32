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

#include <memory>
#include <vector>

#include "core/config.hpp"
#include "policy/copy_head.hpp"
#include "policy/dense_mlp.hpp"
#include "policy/linear_map.hpp"
#include "policy/moe_layer.hpp"

namespace rlx {

// rlx: the layout above. hf: the Hugging Face decoder families' layout
// (policy/hf_checkpoint.hpp reads and writes their checkpoints): no
// position table but rotary embeddings on q and k, RMSNorm everywhere,
// grouped-query attention, SwiGLU feed-forward layers, an optional tied
// lm_head, RLX's value head beside it. The family says the rest:
//   qwen3_moe  Qwen3MoeForCausalLM: RMSNorm on each head's q and k; MoE
//              layers (a bias-free softmax top-k router over SwiGLU
//              experts), dense ones where mlp_only_layers and
//              decoder_sparse_step say
//   qwen2_moe  Qwen2MoeForCausalLM: biases on q, k and v, no q/k norms,
//              a gated shared expert beside the routed ones
//   qwen3      Qwen3ForCausalLM: Qwen3's attention, every layer dense
//   qwen2      Qwen2ForCausalLM (Qwen2, Qwen2.5): Qwen2's attention, dense
//   llama      LlamaForCausalLM (Llama 3, 3.1, 3.2): no biases, no q/k
//              norms, dense, rope scaling "llama3" as well as none
enum class TransformerArch : std::uint8_t { rlx, hf };
enum class HfFamily : std::uint8_t { qwen3_moe, qwen2_moe, qwen3, qwen2, llama };

// Rotary frequencies as the Llama 3 family rescales them (rope_type
// "llama3": long wavelengths divided by `factor`, short ones kept, a
// smooth blend between); `factor` 0: no scaling.
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  std::int64_t original_max_position = 8192;
};

// The defaults are the code policy's (envs/tokens: 99 characters).
struct TransformerOptions {
  std::int64_t vocab = 99;
  std::int64_t d_model = 128;
  std::int64_t heads = 4;
  std::int64_t layers = 2;
  std::int64_t max_len = 256;        // positions (prompt + completion)
  std::int64_t experts = 4;          // per MoE layer (0: a dense model, no MoE layer)
  std::int64_t top_k = 2;            // 0 with experts 0
  std::int64_t expert_hidden = 256;
  double capacity_factor = 0;        // 0: no token dropped
  TransformerArch arch = TransformerArch::rlx;
  bool copy_head = false;            // rlx only: logits mix in a pointer at the context (policy/copy_head.hpp)
  // hf:
  std::int64_t kv_heads = 0;         // key/value heads (0: heads)
  std::int64_t head_dim = 0;         // 0: d_model / heads
  double rope_theta = 1e6;
  RopeScaling rope_scaling;
  double rms_eps = 1e-6;
  bool norm_topk_prob = true;        // renormalise the top-k router probabilities
  bool tie_embeddings = false;       // lm_head shares the token embedding
  HfFamily family = HfFamily::qwen3_moe;
  std::int64_t shared_expert_hidden = 0;  // qwen2_moe: the shared expert's width (0: none)
  std::int64_t mlp_hidden = 0;       // a dense layer's SwiGLU width (intermediate_size)
  std::vector<std::int64_t> mlp_only_layers;  // MoE families: layers with a dense MLP instead
  std::int64_t sparse_step = 1;      // MoE families: every sparse_step-th layer is MoE (decoder_sparse_step)
  // What the weights are held and computed in ([policy] dtype). A model of
  // fp32 parameters with dtype bf16 (make_trainable_transformer: the
  // learner's master weights) computes its forward in bf16 where LibTorch
  // has bf16 kernels (policy/low_precision.hpp). Logits, values and the
  // router's losses come out in fp32 either way.
  WeightDType dtype = WeightDType::f32;
  // LoRA ([policy.lora]; hf only): rank > 0 holds every weight of the
  // checkpoint in `lora_base` frozen (buffers: policy/lora_base.hpp binds
  // them to the process's one copy) and trains adapters on lora.targets,
  // the value head and (lora.router) the routers.
  LoraConfig lora;
  std::string lora_base;
  bool lora_on() const { return lora.rank > 0; }
  bool adapts(const std::string& target) const;  // lora.targets names it (with a rank)
  std::int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t head_width() const { return head_dim > 0 ? head_dim : d_model / heads; }
  bool qkv_bias() const { return family == HfFamily::qwen2_moe || family == HfFamily::qwen2; }
  bool qk_norm() const { return family == HfFamily::qwen3_moe || family == HfFamily::qwen3; }
  bool moe_family() const { return family == HfFamily::qwen3_moe || family == HfFamily::qwen2_moe; }
  // Whether layer l's feed-forward is an MoE layer (the families' rule:
  // not in mlp_only_layers, and (l + 1) a multiple of sparse_step).
  bool moe_layer(std::int64_t l) const;
};

struct TransformerOutput {
  torch::Tensor logits;           // [B, S, V] (undefined from forward_hidden)
  torch::Tensor hidden;           // [B, S, d_model]: the final norm's output (forward_hidden only)
  torch::Tensor values;           // [B, S]
  torch::Tensor routes;           // [layers, B, S, k] int64 (-1 in a dense layer)
  torch::Tensor load_balance;     // scalar, mean over MoE layers (1 when balanced; 1 without any)
  torch::Tensor router_z;         // scalar, mean over MoE layers (0 without any)
  torch::Tensor expert_fraction;  // [layers, E] (0 in a dense layer)
  double dropped_fraction = 0;    // mean over MoE layers
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
  // `draw` false (arch hf only): every parameter a checkpoint holds is
  // allocated but not drawn, for a caller that fills them next.
  explicit MoETransformerImpl(const TransformerOptions& options, bool draw = true);

  // tokens, valid: [B, S]. With `replay_routes` ([layers, B, S, k],
  // defined) every MoE layer uses those experts.
  TransformerOutput forward(const torch::Tensor& tokens, const torch::Tensor& valid,
                            const torch::Tensor& replay_routes = {});

  // The same without the output layer: `hidden` instead of `logits`, for a
  // caller that takes the logits a chunk of positions at a time
  // (head_logits; learner/head_log_probs.hpp). Not with a copy head.
  TransformerOutput forward_hidden(const torch::Tensor& tokens, const torch::Tensor& valid,
                                   const torch::Tensor& replay_routes = {});
  // The output layer over hidden states [N, d_model]: logits [N, V] in fp32.
  torch::Tensor head_logits(const torch::Tensor& hidden);
  // The output layer's parameters that train (lm_head, its adapters, or the
  // tied embedding); none when it is frozen.
  std::vector<torch::Tensor> head_parameters() const;
  // Whether forward computes in bf16 over fp32 master weights (LowPrecision).
  bool low_precision() const;

  KVCache new_cache(std::int64_t batch, std::int64_t capacity) const;
  // Appends tokens/valid ([B, S]) to `cache` and returns their outputs
  // (no gradient: the sampler's path). REQUIRES: cache.length + S <= capacity.
  TransformerOutput step(const torch::Tensor& tokens, const torch::Tensor& valid, KVCache& cache);

  const TransformerOptions& options() const { return options_; }
  // The token embedding [vocab, d_model].
  torch::Tensor embedding() const { return embed_ ? embed_->weight : tok_->weight; }
  // hf: every parameter under its Hugging Face name, as a view
  // shaped as the checkpoint holds it (policy/hf_checkpoint.cpp); the value
  // head is not among them.
  std::vector<std::pair<std::string, torch::Tensor>> hf_tensors() const;
  // LoRA: every adapter under the name of the Hugging Face module it
  // adapts ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.experts.3.down_proj"),
  // A [rank, in] and B [out, rank] as PEFT lays them out (views).
  struct HfAdapter {
    std::string module;
    torch::Tensor A, B;
  };
  std::vector<HfAdapter> hf_adapters() const;
  // LoRA: the process's frozen base this model's buffers view, held while
  // the model lives (policy/lora_base.hpp).
  std::shared_ptr<const void> keep_base;

 private:
  // One pass: keys/values of the new tokens go to `cache` when given.
  TransformerOutput run(const torch::Tensor& tokens, const torch::Tensor& valid, const torch::Tensor& positions,
                        const torch::Tensor& key_valid, std::int64_t offset, KVCache* cache,
                        const torch::Tensor& replay_routes, bool logits = true);
  torch::Tensor head(const torch::Tensor& hidden);  // the output layer, in the weights' dtype
  // One layer's attention block (its residual not added) for each arch.
  torch::Tensor attention(std::int64_t l, const torch::Tensor& x, const torch::Tensor& positions,
                          const torch::Tensor& allowed, std::int64_t offset, KVCache* cache);
  torch::Tensor norm(std::int64_t which, std::int64_t l, const torch::Tensor& x);  // 1: before attention, 2: before MoE, 0: final
  TransformerOptions options_;
  EmbeddingMap tok_{nullptr}, pos_{nullptr};
  // hf
  std::vector<torch::Tensor> in_norm_, post_norm_, q_norm_, k_norm_;  // q_norm_, k_norm_: Qwen3 only
  std::vector<LinearMap> q_, k_, v_, o_;
  LinearMap embed_{nullptr}, head_{nullptr};  // the token embedding, lm_head (untied)
  torch::Tensor rope_inv_;   // the rotary inverse frequencies (float64, CPU), from the options once
  torch::Tensor rope_here_;  // the same on the device and in the dtype of the last forward
  torch::Tensor final_norm_;
  std::vector<LayerNormMap> ln1_, ln2_;
  std::vector<LinearMap> qkv_, proj_;
  std::vector<MoELayer> moe_;      // per layer; empty in a dense layer
  std::vector<SwiGluMlp> mlp_;     // hf: per layer; empty in an MoE layer
  LayerNormMap ln_f_{nullptr};
  LinearMap lm_head_{nullptr};
  torch::nn::Linear v_head_{nullptr};
  CopyHead copy_{nullptr};
};
TORCH_MODULE(MoETransformer);

// The shape a [policy] table names, for a vocabulary of `vocab` tokens.
TransformerOptions transformer_options(const PolicyConfig& policy, std::int64_t vocab);

// Built from `seed` alone (serialised like make_seeded_policy).
MoETransformer make_seeded_transformer(const TransformerOptions& options, std::uint64_t seed);
// Built to be filled next, from a checkpoint or a weight set: in the
// Hugging Face layout every parameter a checkpoint holds is allocated but
// not drawn (no time spent, no page touched), the value head drawn from
// `seed`; RLX's own layout is drawn whole, as make_seeded_transformer's.
// Using it before every checkpoint tensor is written reads garbage.
MoETransformer make_unfilled_transformer(const TransformerOptions& options, std::uint64_t seed);
// What a learner trains: parameters in fp32 (its master weights) whatever
// options.dtype, computing in options.dtype; drawn from `seed`, or (with
// `unfilled`) built to be filled next as make_unfilled_transformer's.
// Both of those hold their parameters in options.dtype.
MoETransformer make_trainable_transformer(const TransformerOptions& options, std::uint64_t seed, bool unfilled);
// With options.lora_on(), all three build make_lora_transformer's model
// (policy/lora_base.hpp): the base the process's frozen copy of
// options.lora_base, adapters and value head from `seed` (fp32 masters for
// the trainable one).

// Positions of left-padded rows: the count of real tokens before each one
// (0 for padding). valid: [B, S] bool -> [B, S] int64.
torch::Tensor positions_of(const torch::Tensor& valid);

// Of the real tokens (`valid` [B, S]) of every layer, the fraction whose
// expert set in `a` differs from the set in `b` (both [layers, B, S, k]).
double route_mismatch(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& valid);

}  // namespace rlx
