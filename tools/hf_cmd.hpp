// `rlx init-model --hf DIR` and `rlx export --hf DIR` (issue 26;
// docs/hf-models.md): a Qwen3-MoE checkpoint of a chosen shape made from a
// seed (a small model of a public family's architecture to train from),
// and a trained token policy written back in the family's format
// (config.json, safetensors, the tokenizer's files) for inference engines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlx {

struct InitModelArgs {
  std::string dir;                 // where the checkpoint goes
  std::string tokenizer;           // a tokenizer.json (copied beside the weights); "" for the character vocabulary
  std::int64_t vocab = 0;          // 0: the tokenizer's size
  std::int64_t d_model = 128, layers = 2, heads = 4, kv_heads = 2, head_dim = 0;
  std::int64_t experts = 8, top_k = 2, expert_hidden = 128, max_len = 4096;
  bool tie = false;
  std::string family = "qwen3_moe";  // qwen3_moe | qwen2_moe | qwen3 | qwen2 | llama (policy/moe_transformer.hpp)
  std::int64_t shared_expert_hidden = 0;  // qwen2_moe: the shared expert's width (0: expert_hidden)
  std::int64_t mlp_hidden = 0;     // a dense layer's width (0: 4 x d_model)
  std::vector<std::int64_t> mlp_only_layers;  // MoE families: dense layers among the MoE ones
  double rope_factor = -1;         // Llama 3's rope scaling (0: none; -1: 8 for llama as 3.1 and 3.2 ship, else none)
  std::string dtype = "f32";       // f32 | bf16
  double shard_mb = 0;             // 0: one file
  std::uint64_t seed = 1;
};

struct ExportArgs {
  std::string dir;                 // where the checkpoint goes (--hf)
  std::string peft;                // or where a LoRA policy's adapters go (--peft)
  bool merge = false;              // --hf of a LoRA policy: adapters merged into the base
  std::string config;              // the run's cluster.toml (its [policy] and [tokens])
  // The weights: a learner checkpoint (ckpt-N.bin), a log_dir (its newest
  // checkpoint), a file of `rlx sft --out`, or "hf:DIR"; "" for the
  // config's log_dir.
  std::string from;
  std::string dtype = "f32";
  double shard_mb = 0;
};

// 0: written; 2: bad arguments or input, or the files could not be written.
int init_model_command(const InitModelArgs& args);
int export_command(const ExportArgs& args);
// `rlx check-model --hf DIR`: loads the checkpoint as a run would, runs
// one forward pass, and prints its shape, the load time and the resident
// memory before and at the peak of loading (one JSON line with `json`).
// 0: it loads and its logits are finite; 2 otherwise.
int check_model_command(const std::string& dir, bool json);

}  // namespace rlx
