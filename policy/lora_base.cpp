#include "policy/lora_base.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "policy/hf_checkpoint.hpp"
#include "policy/moe_layer.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

struct Base {
  std::unordered_map<std::string, torch::Tensor> buffers;  // by the model's buffer names
};

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::weak_ptr<const Base>>& registry() {
  static std::map<std::string, std::weak_ptr<const Base>> held;
  return held;
}

// Reads the checkpoint into the model's buffers (allocated in the dtype,
// nothing drawn) and its checkpoint-held parameters (a trained router;
// RLX's own layout: every parameter the file holds, the value and copy
// heads too).
Result<std::shared_ptr<const Base>> read_base(MoETransformer& model) {
  const auto& o = model->options();
  const auto type = torch_dtype(o.dtype);
  {
    torch::NoGradGuard guard;
    for (auto& b : model->buffers(true))
      if (b.scalar_type() != type) b.set_data(torch::empty(b.sizes(), b.options().dtype(type)));
  }
  if (o.arch == TransformerArch::hf) {
    auto checkpoint = SafetensorsCheckpoint::open(o.lora_base);
    if (!checkpoint) return checkpoint.error();
    if (auto r = load_hf_weights(model, *checkpoint); !r)
      return make_error(Errc::invalid_field, o.lora_base + ": " + r.error().message);
  } else if (auto r = load_saved_weights(model, o.lora_base); !r) {
    return r.error();
  }
  auto base = std::make_shared<Base>();
  for (const auto& b : model->named_buffers(true)) base->buffers.emplace(b.key(), b.value());
  return std::shared_ptr<const Base>(std::move(base));
}

// A view of one of the model's parameters (not a buffer)?
bool of_parameters(const MoETransformer& model, const torch::Tensor& view) {
  for (const auto& p : model->parameters(true))
    if (p.is_same(view) || (view.has_storage() && p.has_storage() && view.storage().is_alias_of(p.storage())))
      return true;
  return false;
}

}  // namespace

Result<MoETransformer> make_lora_transformer(const TransformerOptions& options, std::uint64_t seed, bool masters) {
  RLX_REQUIRE(options.lora_on());
  MoETransformer model(nullptr);
  {
    auto lock = seeded_init(seed);
    model = MoETransformer(options, /*draw=*/false);
  }
  const auto key = options.lora_base + (options.dtype == WeightDType::bf16 ? " bf16" : " f32");
  {
    // One reader at a time; a model built meanwhile waits and shares.
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto base = registry()[key].lock();
    if (base) {
      torch::NoGradGuard guard;
      for (auto& b : model->named_buffers(true)) {
        auto it = base->buffers.find(b.key());
        RLX_REQUIRE(it != base->buffers.end() && it->second.sizes() == b.value().sizes(), b.key());
        b.value().set_data(it->second);
      }
      if (options.arch != TransformerArch::hf) {  // the heads (and a trained router) are the file's
        if (auto r = load_saved_weights(model, options.lora_base, /*parameters_only=*/true); !r) return r.error();
      } else if (options.lora.router) {  // read into this model's own parameters
        auto checkpoint = SafetensorsCheckpoint::open(options.lora_base);
        if (!checkpoint) return checkpoint.error();
        const auto mine = [&](const torch::Tensor& view) { return of_parameters(model, view); };
        if (auto r = load_hf_weights(model, *checkpoint, mine); !r)
          return make_error(Errc::invalid_field, options.lora_base + ": " + r.error().message);
      }
    } else {
      auto read = read_base(model);
      if (!read) return read.error();
      base = *read;
      registry()[key] = base;
    }
    model->keep_base = base;
  }
  if (!masters && options.dtype == WeightDType::bf16) {
    torch::NoGradGuard guard;
    for (auto& p : model->parameters(true)) p.set_data(p.to(torch::kBFloat16));
  }
  return model;
}

std::size_t lora_bases_held() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::size_t n = 0;
  for (const auto& [key, base] : registry()) n += !base.expired();
  return n;
}

}  // namespace rlx
