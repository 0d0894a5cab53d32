#include "policy/hf_checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;

std::string shape_text(c10::IntArrayRef s) { return s.empty() ? "scalar" : fmt::format("{}", fmt::join(s, "x")); }

// Pairs each parameter and buffer of `m` with its tensor in `archive` (as
// torch::save wrote them); the names of those absent go to `absent`.
// An adapter's tensor (lora_A, lora_B_up, ...): drawn, never read from weights.
bool is_adapter(const std::string& name) {
  const auto dot = name.rfind('.');
  return name.compare(dot == std::string::npos ? 0 : dot + 1, 5, "lora_") == 0;
}

// With `parameters_only`, buffers are skipped; adapters always are.
Result<void> pair_saved(torch::nn::Module& m, torch::serialize::InputArchive& archive, const std::string& prefix,
                        std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs, std::vector<std::string>& absent,
                        bool parameters_only) {
  for (bool buffers : {false, true})
    for (auto& p : buffers ? m.named_buffers(false) : m.named_parameters(false)) {
      if ((buffers && parameters_only) || is_adapter(p.key())) continue;
      torch::Tensor saved;
      if (!archive.try_read(p.key(), saved, buffers)) {
        absent.push_back(prefix + p.key());
      } else if (saved.sizes() != p.value().sizes()) {
        return make_error(Errc::invalid_field, fmt::format("{}{} is {}, this policy's {}", prefix, p.key(),
                                                           shape_text(saved.sizes()), shape_text(p.value().sizes())));
      } else {
        pairs.emplace_back(p.value(), saved);
      }
    }
  for (auto& child : m.named_children()) {
    torch::serialize::InputArchive sub;
    if (archive.try_read(child.key(), sub)) {
      if (auto r = pair_saved(*child.value(), sub, prefix + child.key() + ".", pairs, absent, parameters_only); !r)
        return r;
      continue;
    }
    for (auto& p : child.value()->named_parameters(true))
      if (!is_adapter(p.key())) absent.push_back(prefix + child.key() + "." + p.key());
    if (!parameters_only)
      for (auto& b : child.value()->named_buffers(true)) absent.push_back(prefix + child.key() + "." + b.key());
  }
  return {};
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> MoETransformerImpl::hf_tensors() const {
  RLX_REQUIRE(options_.arch == TransformerArch::hf);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", embed_->weight);
  for (std::int64_t l = 0; l < options_.layers; ++l) {
    const auto p = fmt::format("model.layers.{}.", l);
    out.emplace_back(p + "input_layernorm.weight", in_norm_[l]);
    out.emplace_back(p + "self_attn.q_proj.weight", q_[l]->weight);
    out.emplace_back(p + "self_attn.k_proj.weight", k_[l]->weight);
    out.emplace_back(p + "self_attn.v_proj.weight", v_[l]->weight);
    if (options_.qkv_bias()) {
      out.emplace_back(p + "self_attn.q_proj.bias", q_[l]->bias);
      out.emplace_back(p + "self_attn.k_proj.bias", k_[l]->bias);
      out.emplace_back(p + "self_attn.v_proj.bias", v_[l]->bias);
    }
    out.emplace_back(p + "self_attn.o_proj.weight", o_[l]->weight);
    if (options_.qk_norm()) {
      out.emplace_back(p + "self_attn.q_norm.weight", q_norm_[l]);
      out.emplace_back(p + "self_attn.k_norm.weight", k_norm_[l]);
    }
    out.emplace_back(p + "post_attention_layernorm.weight", post_norm_[l]);
    if (!moe_[l]) {
      out.emplace_back(p + "mlp.gate_proj.weight", mlp_[l]->gate_proj());
      out.emplace_back(p + "mlp.up_proj.weight", mlp_[l]->up_proj());
      out.emplace_back(p + "mlp.down_proj.weight", mlp_[l]->down_proj());
      continue;
    }
    out.emplace_back(p + "mlp.gate.weight", moe_[l]->router_weight());
    for (std::int64_t e = 0; e < options_.experts; ++e) {
      const auto q = fmt::format("{}mlp.experts.{}.", p, e);
      out.emplace_back(q + "gate_proj.weight", moe_[l]->gate_proj(e));
      out.emplace_back(q + "up_proj.weight", moe_[l]->up_proj(e));
      out.emplace_back(q + "down_proj.weight", moe_[l]->down_proj(e));
    }
    if (options_.shared_expert_hidden > 0) {
      out.emplace_back(p + "mlp.shared_expert.gate_proj.weight", moe_[l]->shared_gate_proj());
      out.emplace_back(p + "mlp.shared_expert.up_proj.weight", moe_[l]->shared_up_proj());
      out.emplace_back(p + "mlp.shared_expert.down_proj.weight", moe_[l]->shared_down_proj());
      out.emplace_back(p + "mlp.shared_expert_gate.weight", moe_[l]->shared_expert_gate());
    }
  }
  out.emplace_back("model.norm.weight", final_norm_);
  if (!options_.tie_embeddings) out.emplace_back("lm_head.weight", head_->weight);
  return out;
}

std::vector<MoETransformerImpl::HfAdapter> MoETransformerImpl::hf_adapters() const {
  std::vector<HfAdapter> out;
  const auto add = [&](std::string module, const LinearMap& m) {
    if (m->lora_A.defined()) out.push_back({std::move(module), m->lora_A, m->lora_B});
  };
  static const char* kProj[3] = {"gate_proj", "up_proj", "down_proj"};
  for (std::int64_t l = 0; l < options_.layers; ++l) {
    const auto p = fmt::format("model.layers.{}.", l);
    add(p + "self_attn.q_proj", q_[l]);
    add(p + "self_attn.k_proj", k_[l]);
    add(p + "self_attn.v_proj", v_[l]);
    add(p + "self_attn.o_proj", o_[l]);
    for (int w = 0; w < 3; ++w) {
      if (mlp_[l]) add(p + "mlp." + kProj[w], mlp_[l]->map(w));
      if (!moe_[l] || !moe_[l]->adapted()) continue;
      for (std::int64_t e = 0; e < options_.experts; ++e)
        out.push_back(
            {fmt::format("{}mlp.experts.{}.{}", p, e, kProj[w]), moe_[l]->adapter_A(w, e), moe_[l]->adapter_B(w, e)});
    }
  }
  if (head_) add("lm_head", head_);
  return out;
}

Result<void> load_hf_weights(MoETransformer& model, const SafetensorsCheckpoint& checkpoint,
                             const HfTensorFilter& only) {
  torch::NoGradGuard guard;
  std::set<std::string> wanted;
  for (auto& [name, view] : model->hf_tensors()) {
    if (only && !only(view)) continue;
    wanted.insert(name);
    const StTensor* t = checkpoint.find(name);
    if (!t) return make_error(Errc::invalid_field, "the checkpoint has no tensor " + name + " (shape " + shape_text(view.sizes()) + ")");
    if (view.sizes().vec() != t->shape)
      return make_error(Errc::invalid_field, fmt::format("tensor {}: the checkpoint's shape is {}, the model's {}", name,
                                                         shape_text(t->shape), shape_text(view.sizes())));
    const bool bf16 = view.scalar_type() == torch::kBFloat16;
    if (view.is_contiguous() && view.device().is_cpu() && (bf16 || view.scalar_type() == torch::kFloat32)) {
      // Straight into the parameter, a chunk at a time, each chunk's mapped
      // pages handed back once copied: resident memory grows by the model
      // in its own dtype (a bf16 tensor into a bf16 parameter: its bytes).
      const auto n = static_cast<std::size_t>(view.numel());
      const std::size_t width = st_dtype_size(t->dtype);
      constexpr std::size_t kChunk = std::size_t{1} << 22;  // elements
      std::vector<float> wide;                                // an fp32 chunk on its way into bf16
      for (std::size_t first = 0; first < n; first += kChunk) {
        const auto count = std::min(kChunk, n - first);
        st_prefetch(*t, first * width, count * width);
        if (!bf16) {
          if (auto r = st_to_f32(*t, first, count, view.data_ptr<float>() + first); !r) return r.error();
        } else if (t->dtype == StDtype::bf16) {
          std::memcpy(static_cast<std::byte*>(view.data_ptr()) + first * 2, t->data + first * 2, count * 2);
        } else {
          wide.resize(count);
          if (auto r = st_to_f32(*t, first, count, wide.data()); !r) return r.error();
          view.view({-1}).narrow(0, static_cast<std::int64_t>(first), static_cast<std::int64_t>(count))
              .copy_(torch::from_blob(wide.data(), {static_cast<std::int64_t>(count)}, torch::kFloat32));
        }
        st_release(*t, first * width, count * width);
      }
    } else {
      auto values = st_to_f32(*t);
      if (!values) return values.error();
      view.copy_(torch::from_blob(values->data(), view.sizes(), torch::kFloat32));
      st_release(*t);
    }
  }
  for (const auto& name : checkpoint.names())
    if (!only && !wanted.count(name))
      return make_error(Errc::invalid_field, "the checkpoint has a tensor the model does not: " + name);
  return {};
}

std::string hf_init_dir(const std::string& init) { return init.starts_with("hf:") ? init.substr(3) : std::string(); }

Result<TransformerOptions> policy_transformer_options(const PolicyConfig& policy, std::int64_t vocab) {
  const auto dir = hf_init_dir(policy.init);
  if (dir.empty()) {
    auto o = transformer_options(policy, vocab);
    if (policy.lora.rank > 0) {
      o.lora = policy.lora;
      o.lora_base = policy.init;
      if (auto r = check_lora_targets(o); !r) return make_error(Errc::config_range, r.error().message);
    }
    return o;
  }
  if (policy.copy_head)
    return make_error(Errc::config_range, "[policy] copy_head: RLX's own layout only, not a Hugging Face start (" +
                                              policy.init + ")");
  const auto file = (std::filesystem::path(dir) / "config.json").string();
  auto text = read_text_file(file);
  if (!text) return make_error(Errc::config_missing, "[policy] init: " + text.error().message);
  auto o = hf_transformer_options(*text, policy.max_len);
  if (!o) return make_error(Errc::invalid_field, file + ": " + o.error().message);
  if (o->vocab < vocab)
    return make_error(Errc::invalid_field, fmt::format("{}: vocab_size {} is smaller than the tokenizer's {} ids ([tokens] tokenizer)",
                                                       file, o->vocab, vocab));
  o->capacity_factor = policy.capacity_factor;
  o->dtype = policy.dtype;
  if (policy.lora.rank > 0) {
    o->lora = policy.lora;
    o->lora_base = dir;
    if (auto r = check_lora_targets(*o); !r) return make_error(Errc::config_range, file + ": " + r.error().message);
  }
  return o;
}

Result<void> check_lora_targets(const TransformerOptions& o) {
  if (o.arch == TransformerArch::rlx) {  // q, k and v are one map there
    const std::vector<std::string> modules = {"qkv", "o_proj", "experts", "lm_head"};
    for (const auto& t : o.lora.targets)
      if (std::find(modules.begin(), modules.end(), t) == modules.end())
        return make_error(
            Errc::config_range,
            fmt::format(
                "[policy.lora] targets: RLX's own layout has no \"{}\"{}; its modules: {}", t,
                t.ends_with("_proj") && t != "o_proj" ? " (its attention's q, k and v are one map, \"qkv\")" : "",
                fmt::join(modules, ", ")));
    return {};
  }
  bool moe = false, dense = false;
  for (std::int64_t l = 0; l < o.layers; ++l) (o.moe_layer(l) ? moe : dense) = true;
  std::vector<std::string> modules = {"q_proj", "k_proj", "v_proj", "o_proj"};
  if (dense) modules.insert(modules.end(), {"gate_proj", "up_proj", "down_proj"});
  if (moe) modules.push_back("experts");
  if (!o.tie_embeddings) modules.push_back("lm_head");
  for (const auto& t : o.lora.targets)
    if (std::find(modules.begin(), modules.end(), t) == modules.end())
      return make_error(Errc::config_range,
                        fmt::format("[policy.lora] targets: this {} model has no \"{}\" ({}); its modules: {}",
                                    hf_model_type(o.family), t,
                                    t == "experts"   ? "no MoE layer"
                                    : t == "lm_head" ? "its output layer is the token embedding (tied)"
                                                     : "no dense MLP layer: its experts are \"experts\"",
                                    fmt::join(modules, ", ")));
  if (o.lora.router && !moe)
    return make_error(Errc::config_range, fmt::format("[policy.lora] router: this {} model has no MoE layer, no router",
                                                      hf_model_type(o.family)));
  return {};
}

TransformerOptions run_transformer_options(const PolicyConfig& policy, std::int64_t vocab) {
  auto o = policy_transformer_options(policy, vocab);
  RLX_REQUIRE(o.ok(), o.error().message);
  return *o;
}

Result<std::string> absent_tensors_note(const std::vector<std::string>& absent, bool head_saved) {
  std::vector<std::string> fresh, missing;
  for (const auto& name : absent) (name.starts_with("copy.") ? fresh : missing).push_back(name);
  if (!missing.empty()) {
    missing.resize(std::min<std::size_t>(missing.size(), 3));
    return make_error(Errc::invalid_field, fmt::format("no {} in it", fmt::join(missing, ", ")));
  }
  if (fresh.empty()) return std::string();
  if (!head_saved) return std::string("no copy head in it: the head starts fresh");
  return fmt::format("its copy head has no {}: {} as built", fmt::join(fresh, ", "),
                     fresh.size() == 1 ? "that starts" : "those start");
}

Result<std::string> load_policy_init(MoETransformer& model, const std::string& init) {
  if (model->options().lora_on()) return std::string();  // read as it was built (policy/lora_base.hpp)
  if (const auto dir = hf_init_dir(init); !dir.empty()) {
    auto checkpoint = SafetensorsCheckpoint::open(dir);
    if (!checkpoint) return checkpoint.error();
    if (auto r = load_hf_weights(model, *checkpoint); !r) return make_error(Errc::invalid_field, dir + ": " + r.error().message);
    return std::string();
  }
  return load_saved_weights(model, init);
}

Result<std::string> load_saved_weights(MoETransformer& model, const std::string& file, bool parameters_only) {
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(file);
    torch::serialize::InputArchive head;
    const bool has_copy = archive.try_read("copy", head);
    if (has_copy && !model->options().copy_head)
      return make_error(Errc::invalid_field, file +
                                                 ": weights with a copy head, for a policy without one "
                                                 "(set [policy] copy_head = true)");
    std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
    std::vector<std::string> absent;
    if (auto r = pair_saved(*model, archive, "", pairs, absent, parameters_only); !r)
      return make_error(Errc::invalid_field, file + ": not weights of this policy shape (" + r.error().message + ")");
    auto note = absent_tensors_note(absent, has_copy);
    if (!note)
      return make_error(Errc::invalid_field,
                        file + ": not weights of this policy shape (" + note.error().message + ")");
    torch::NoGradGuard guard;
    for (auto& [mine, saved] : pairs) mine.copy_(saved);
    return note;
  } catch (const c10::Error& e) {
    return make_error(Errc::invalid_field, file + ": not weights of this policy shape (" +
                                               std::string(e.what_without_backtrace()).substr(0, 200) + ")");
  }
}

Result<void> copy_tokenizer_files(const std::string& tokenizer_json, const std::string& dir) {
  namespace fs = std::filesystem;
  if (tokenizer_json.empty() || !tokenizer_json.ends_with(".json")) return {};
  std::error_code ec;
  const fs::path from(tokenizer_json);
  for (const std::string name : {"tokenizer.json", "tokenizer_config.json"}) {
    const auto src = name == "tokenizer.json" ? from : from.parent_path() / name;
    const auto dst = fs::path(dir) / name;
    if (!fs::exists(src, ec)) {
      if (name == "tokenizer.json") return make_error(Errc::io, "no tokenizer file " + src.string());
      continue;
    }
    if (fs::exists(dst, ec) && fs::equivalent(src, dst, ec)) continue;
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error(Errc::io, fmt::format("cannot copy {} to {}: {}", src.string(), dir, ec.message()));
  }
  return {};
}

Result<MoETransformer> load_hf_transformer(const std::string& dir, std::int64_t max_len, std::uint64_t seed) {
  auto text = read_text_file((std::filesystem::path(dir) / "config.json").string());
  if (!text) return text.error();
  auto options = hf_transformer_options(*text, max_len);
  if (!options) return options.error();
  auto checkpoint = SafetensorsCheckpoint::open(dir);
  if (!checkpoint) return checkpoint.error();
  auto model = make_unfilled_transformer(*options, seed);
  if (auto r = load_hf_weights(model, *checkpoint); !r) return r.error();
  return model;
}

Result<void> export_hf(const MoETransformer& model, const std::string& dir, StDtype dtype, std::uint64_t shard_bytes,
                       bool merge) {
  namespace fs = std::filesystem;
  if (dtype != StDtype::f32 && dtype != StDtype::bf16)
    return make_error(Errc::invalid_field, "export: dtype must be F32 or BF16");
  // A LoRA policy's weights are its base with each adapter merged in
  // (W + alpha/rank B A), made one tensor at a time as it is written.
  const auto adapters = model->hf_adapters();
  if (!adapters.empty() && !merge)
    return make_error(Errc::invalid_field,
                      "export: the policy has LoRA adapters: write it merged into its base "
                      "(--merge), or the adapters alone (--peft DIR)");
  std::map<std::string, const MoETransformerImpl::HfAdapter*> adapter_of;
  for (const auto& a : adapters) adapter_of[a.module + ".weight"] = &a;
  const double scaling =
      model->options().lora_on() ? model->options().lora.alpha / double(model->options().lora.rank) : 0;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Errc::io, "export: cannot make " + dir + ": " + ec.message());
  // Shards in order, each up to shard_bytes (a tensor larger than that
  // gets one alone), planned from the sizes; each tensor's bytes made as
  // they are written, a chunk at a time, so that an export holds the
  // model and one chunk (and, for a model off the CPU or not in F32, one
  // tensor's copy).
  const auto tensors = model->hf_tensors();
  const std::size_t width = dtype == StDtype::f32 ? 4 : 2;
  std::vector<std::vector<std::size_t>> plan(1);
  std::uint64_t in_shard = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(tensors[i].second.numel()) * width;
    if (shard_bytes > 0 && in_shard > 0 && in_shard + bytes > shard_bytes) {
      plan.emplace_back();
      in_shard = 0;
    }
    plan.back().push_back(i);
    in_shard += bytes;
  }
  const auto writer = [&](const std::string& name, const torch::Tensor& view) {
    torch::Tensor A, B;
    if (auto it = adapter_of.find(name); it != adapter_of.end()) A = it->second->A, B = it->second->B;
    return [view, A, B, scaling, dtype](std::ostream& out) {
      torch::NoGradGuard guard;
      auto t = view.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      if (A.defined())
        t = t +
            torch::matmul(B.detach().to(torch::kCPU, torch::kFloat32), A.detach().to(torch::kCPU, torch::kFloat32)) *
                scaling;
      const float* p = t.data_ptr<float>();
      const auto n = static_cast<std::size_t>(t.numel());
      if (dtype == StDtype::f32) {
        out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n * 4));
        return static_cast<bool>(out);
      }
      std::vector<std::uint16_t> chunk(std::min<std::size_t>(n, std::size_t{1} << 20));
      for (std::size_t first = 0; first < n; first += chunk.size()) {
        const auto count = std::min(chunk.size(), n - first);
        for (std::size_t k = 0; k < count; ++k) chunk[k] = f32_to_bf16(p[first + k]);
        out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(count * 2));
      }
      return static_cast<bool>(out);
    };
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  json map = json::object();
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < plan.size(); ++s) {
    std::vector<StTensorOut> out;
    for (const auto i : plan[s]) {
      const auto& [name, view] = tensors[i];
      const auto bytes = static_cast<std::size_t>(view.numel()) * width;
      out.push_back({name, dtype, view.sizes().vec(), nullptr, bytes, writer(name, view)});
    }
    const auto file = plan.size() == 1 ? std::string("model.safetensors")
                                       : fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, plan.size());
    if (auto r = write_safetensors((fs::path(dir) / file).string(), out, meta); !r) return r;
    for (const auto& t : out) {
      map[t.name] = file;
      total += t.bytes;
    }
  }
  if (plan.size() > 1) {
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
    if (auto r = write_text_atomically(fs::path(dir) / "model.safetensors.index.json", index.dump(2) + "\n"); !r) return r;
  }
  // A folder exported to before with another sharding keeps no stale
  // weights a loader could prefer (model.safetensors over an index).
  if (plan.size() == 1) fs::remove(fs::path(dir) / "model.safetensors.index.json", ec);
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    const bool weights = name == "model.safetensors" || (name.starts_with("model-") && name.ends_with(".safetensors"));
    if (weights && std::none_of(map.begin(), map.end(), [&](const json& f) { return f == name; })) stale.push_back(e.path());
  }
  for (const auto& f : stale) fs::remove(f, ec);
  auto config = json::parse(hf_config_json(model->options()));
  config["torch_dtype"] = dtype == StDtype::f32 ? "float32" : "bfloat16";
  return write_text_atomically(fs::path(dir) / "config.json", config.dump(2) + "\n");
}

}  // namespace rlx
