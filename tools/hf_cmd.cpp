#include "tools/hf_cmd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/config.hpp"
#include "core/files.hpp"
#include "envs/env.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "learner/start_weights.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/peft_adapter.hpp"

namespace rlx {

namespace {

namespace fs = std::filesystem;

int fail(const std::string& why) {
  std::fprintf(stderr, "rlx: %s\n", why.c_str());
  return 2;
}

Result<StDtype> dtype_of(const std::string& name) {
  if (name == "f32") return StDtype::f32;
  if (name == "bf16") return StDtype::bf16;
  return make_error(Errc::config_range, "--dtype must be f32 or bf16, got " + name);
}

std::uint64_t shard_bytes(double mb) { return mb > 0 ? static_cast<std::uint64_t>(mb * 1024 * 1024) : 0; }

// "qwen3_moe, 2 layers, 8 experts top-2, vocab 1024" or "llama, 2 layers (dense), vocab 1024".
std::string shape_text(const TransformerOptions& o) {
  std::int64_t moe = 0;
  for (std::int64_t l = 0; l < o.layers; ++l) moe += o.moe_layer(l);
  const auto mix = moe == 0 ? std::string(" (dense)")
                            : fmt::format(", {} experts top-{}{}", o.experts, o.top_k,
                                          moe < o.layers ? fmt::format(" in {} of them", moe) : std::string());
  return fmt::format("{}, {} layers{}, vocab {}", hf_model_type(o.family), o.layers, mix, o.vocab);
}

void report(const std::string& dir, const MoETransformer& model) {
  std::int64_t params = 0;
  for (const auto& [name, t] : model->hf_tensors()) params += t.numel();
  std::printf("wrote %s: %.1fM parameters (%s)\n", dir.c_str(), params / 1e6, shape_text(model->options()).c_str());
}

// VmRSS or VmHWM of this process, in bytes (/proc/self/status).
std::uint64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(field)) return std::stoull(line.substr(std::strlen(field) + 1)) * 1024;
  return 0;
}

}  // namespace

int check_model_command(const std::string& dir, bool as_json) {
  std::uint64_t file_bytes = 0;
  bool all_bf16 = true;  // then the model is held in bf16 ([policy] dtype = "bf16"), in fp32 otherwise
  {  // unmapped again at the end of this block: the load below maps the files itself
    auto checkpoint = SafetensorsCheckpoint::open(dir);
    if (!checkpoint) return fail(checkpoint.error().message);
    for (const auto& f : checkpoint->files())
      for (const auto& t : f.tensors()) file_bytes += t.bytes, all_bf16 = all_bf16 && t.dtype == StDtype::bf16;
  }
  const auto rss_before = status_bytes("VmRSS:");
  std::ofstream("/proc/self/clear_refs") << "5";  // the peak (VmHWM) from here
  // As a run loads it: the model built (initialised from a seed), then
  // every tensor copied in from the mapped files.
  const auto start = std::chrono::steady_clock::now();
  auto text = read_text_file((fs::path(dir) / "config.json").string());
  if (!text) return fail(text.error().message);
  auto shape = hf_transformer_options(*text, 64);
  if (!shape) return fail(dir + "/config.json: " + shape.error().message);
  if (all_bf16) shape->dtype = WeightDType::bf16;
  std::optional<MoETransformer> model(make_unfilled_transformer(*shape, 0));
  const auto built = std::chrono::steady_clock::now();
  auto checkpoint = SafetensorsCheckpoint::open(dir);
  if (!checkpoint) return fail(checkpoint.error().message);
  if (auto r = load_hf_weights(*model, *checkpoint); !r) return fail(dir + ": " + r.error().message);
  const auto end = std::chrono::steady_clock::now();
  const double build_s = std::chrono::duration<double>(built - start).count();
  const double load_s = std::chrono::duration<double>(end - start).count();
  const auto rss_peak = std::max(status_bytes("VmHWM:"), status_bytes("VmRSS:"));
  std::int64_t params = 0;
  for (const auto& [name, t] : (*model)->hf_tensors()) params += t.numel();
  torch::NoGradGuard guard;
  const auto& o = (*model)->options();
  const auto tokens = torch::arange(std::min<std::int64_t>(16, o.vocab), torch::kLong).unsqueeze(0);
  const bool finite = torch::isfinite((*model)->forward(tokens, torch::ones_like(tokens, torch::kBool)).logits).all().item<bool>();
  if (as_json) {
    std::printf(
        "{\"parameters\": %lld, \"file_bytes\": %llu, \"dtype\": \"%s\", \"load_s\": %.3f, \"rss_before_bytes\": %llu, "
        "\"rss_peak_bytes\": %llu, \"build_s\": %.3f, \"finite\": %s}\n",
        static_cast<long long>(params), static_cast<unsigned long long>(file_bytes), to_string(o.dtype).c_str(), load_s,
        static_cast<unsigned long long>(rss_before), static_cast<unsigned long long>(rss_peak), build_s,
        finite ? "true" : "false");
  } else {
    std::printf("%s: %.1fM parameters (%s), %.1f MB of weights, held in %s\n", dir.c_str(), params / 1e6,
                shape_text(o).c_str(), file_bytes / 1e6, to_string(o.dtype).c_str());
    std::printf("loaded in %.2f s (%.2f s of it building the model, %.2f s copying the weights in); resident memory "
                "%.0f MB before, %.0f MB at the peak (+%.2fx the weights' bytes); logits %s\n",
                load_s, build_s, load_s - build_s, rss_before / 1e6, rss_peak / 1e6, (static_cast<double>(rss_peak) - rss_before) / file_bytes,
                finite ? "finite" : "NOT finite");
  }
  return finite ? 0 : 2;
}

int init_model_command(const InitModelArgs& a) {
  auto dtype = dtype_of(a.dtype);
  if (!dtype) return fail(dtype.error().message);
  auto tokenizer = Tokenizer::load(a.tokenizer);
  if (!tokenizer) return fail(tokenizer.error().message);
  TransformerOptions o;
  o.arch = TransformerArch::hf;
  const auto family = hf_family_of(a.family);
  if (!family) return fail("--family must be qwen3_moe, qwen2_moe, qwen3, qwen2 or llama");
  o.family = *family;
  o.shared_expert_hidden = o.family == HfFamily::qwen2_moe ? (a.shared_expert_hidden > 0 ? a.shared_expert_hidden : a.expert_hidden) : 0;
  if (o.family != HfFamily::qwen2_moe && a.shared_expert_hidden > 0)
    return fail("--shared-expert-hidden: only Qwen2-MoE has a shared expert (--family qwen2_moe)");
  if (!o.moe_family() && !a.mlp_only_layers.empty())
    return fail("--mlp-only-layers: " + a.family + " is dense throughout");
  o.mlp_only_layers = a.mlp_only_layers;
  o.mlp_hidden = a.mlp_hidden > 0 ? a.mlp_hidden : 4 * a.d_model;
  const double rope_factor = a.rope_factor >= 0 ? a.rope_factor : o.family == HfFamily::llama ? 8.0 : 0.0;
  if (rope_factor > 0) {  // the model's context, max_len, is `factor` times the one it was first trained on
    o.rope_scaling.factor = rope_factor;
    const auto original = static_cast<std::int64_t>(static_cast<double>(a.max_len) / rope_factor);
    o.rope_scaling.original_max_position = std::max<std::int64_t>(1, original);
  }
  o.vocab = a.vocab > 0 ? a.vocab : (*tokenizer)->vocab();
  if (o.vocab < (*tokenizer)->vocab())
    return fail(fmt::format("--vocab {} is smaller than the tokenizer's {} ids", o.vocab, (*tokenizer)->vocab()));
  o.d_model = a.d_model;
  o.layers = a.layers;
  o.heads = a.heads;
  o.kv_heads = a.kv_heads > 0 ? a.kv_heads : a.heads;
  o.head_dim = a.head_dim > 0 ? a.head_dim : a.d_model / a.heads;
  o.experts = o.moe_family() ? a.experts : 0;
  o.top_k = o.moe_family() ? a.top_k : 0;
  o.expert_hidden = o.moe_family() ? a.expert_hidden : 0;
  o.max_len = a.max_len;
  o.tie_embeddings = a.tie;
  // The shape through the same checks a config.json read back gets.
  auto checked = hf_transformer_options(hf_config_json(o));
  if (!checked) return fail(checked.error().message);
  o = *checked;
  auto model = make_seeded_transformer(o, a.seed);
  if (auto r = export_hf(model, a.dir, *dtype, shard_bytes(a.shard_mb)); !r) return fail(r.error().message);
  if (auto r = copy_tokenizer_files(a.tokenizer, a.dir); !r) return fail(r.error().message);
  report(a.dir, model);
  return 0;
}

int export_command(const ExportArgs& a) {
  if (a.dir.empty() == a.peft.empty()) return fail("export: name where to write: --hf DIR or --peft DIR");
  auto dtype = dtype_of(a.dtype);
  if (!dtype) return fail(dtype.error().message);
  auto config = load_config(a.config, builtin_envs().names());
  if (!config) return fail(config.error().message);
  if (config->policy.kind != PolicyKind::moe_transformer) return fail(a.config + ": not a token policy run ([policy] kind)");
  if (auto t = check_tokenizer(config->tokens.tokenizer); !t) return fail(t.error().message);
  const auto vocab = run_tokenizer(config->tokens.tokenizer)->vocab();
  auto shape = policy_transformer_options(config->policy, vocab);
  if (!shape) return fail(shape.error().message);
  if (shape->arch != TransformerArch::hf)
    return fail("the policy is RLX's own layout; only a run started from a Hugging Face checkpoint ([policy] init = "
                "\"hf:DIR\", e.g. made by `rlx init-model --hf`) exports to it");
  // A weights file, hf:DIR, a learner checkpoint, or a log_dir (the config's by default): its newest checkpoint.
  const std::string from = a.from.empty() ? config->run.log_dir : a.from;
  // Every tensor read next (a Hugging Face layout has no copy head to start as built).
  auto model = make_unfilled_transformer(*shape, config->run.seed);
  auto read = load_start_weights(model, from);
  if (!read) return fail(read.error().message);
  std::printf("from %s\n", read->c_str());
  if (!a.peft.empty()) {
    if (auto r = export_peft(model, a.peft, shape->lora_base); !r) return fail(r.error().message);
    std::printf("wrote %s: %zu adapted modules, rank %lld, alpha %g\n", a.peft.c_str(), model->hf_adapters().size(),
                static_cast<long long>(shape->lora.rank), shape->lora.alpha);
    return 0;
  }
  if (a.merge && !shape->lora_on()) return fail("export --merge: the policy has no adapters ([policy.lora]) to merge");
  if (auto r = export_hf(model, a.dir, *dtype, shard_bytes(a.shard_mb), a.merge); !r) return fail(r.error().message);
  if (auto r = copy_tokenizer_files(config->tokens.tokenizer, a.dir); !r) return fail(r.error().message);
  report(a.dir, model);
  return 0;
}

}  // namespace rlx
