#include "policy/peft_adapter.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.hpp"
#include "core/safetensors.hpp"

namespace rlx {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string key_of(const std::string& module, char which) {
  return fmt::format("base_model.model.{}.lora_{}.weight", module, which);
}

std::string shape_text(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

Result<void> export_peft(const MoETransformer& model, const std::string& dir, const std::string& base) {
  const auto& o = model->options();
  const auto adapters = model->hf_adapters();
  if (adapters.empty())
    return make_error(Errc::invalid_field, "export --peft: the policy has no adapters ([policy.lora])");
  if (o.lora.router)
    return make_error(Errc::invalid_field,
                      "export --peft: the routers were trained too ([policy.lora] router), and "
                      "are no adapter: write the merged model (--hf DIR --merge)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(Errc::io, "export: cannot make " + dir + ": " + ec.message());
  std::vector<StTensorOut> out;
  json modules = json::array();
  const auto writer = [](const torch::Tensor& v) {
    return [v](std::ostream& s) {
      const auto t = v.detach().to(torch::kCPU, torch::kFloat32).contiguous();
      s.write(reinterpret_cast<const char*>(t.data_ptr<float>()), static_cast<std::streamsize>(t.numel() * 4));
      return static_cast<bool>(s);
    };
  };
  for (const auto& a : adapters) {
    modules.push_back(a.module);
    for (const auto& [which, t] : {std::pair{'A', a.A}, std::pair{'B', a.B}})
      out.emplace_back(key_of(a.module, which), StDtype::f32, t.sizes().vec(), nullptr,
                       static_cast<std::size_t>(t.numel()) * 4, writer(t));
  }
  if (auto r = write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), out, {{"format", "pt"}}); !r)
    return r;
  const json config = {{"peft_type", "LORA"},
                       {"task_type", "CAUSAL_LM"},
                       {"base_model_name_or_path", base},
                       {"r", o.lora.rank},
                       {"lora_alpha", o.lora.alpha},
                       {"lora_dropout", 0.0},
                       {"bias", "none"},
                       {"fan_in_fan_out", false},
                       {"use_rslora", false},
                       {"use_dora", false},
                       {"init_lora_weights", true},
                       {"inference_mode", true},
                       {"modules_to_save", nullptr},
                       {"target_modules", modules}};
  return write_text_atomically(fs::path(dir) / "adapter_config.json", config.dump(2) + "\n");
}

Result<void> load_peft(MoETransformer& model, const std::string& dir) {
  const auto& o = model->options();
  const auto file = (fs::path(dir) / "adapter_config.json").string();
  auto text = read_text_file(file);
  if (!text) return text.error();
  json config;
  try {
    config = json::parse(*text);
  } catch (const json::exception& e) {
    return make_error(Errc::invalid_field, file + ": not JSON (" + e.what() + ")");
  }
  const auto field = [&](const char* name) { return config.contains(name) ? config[name] : json(); };
  if (field("peft_type") != "LORA")
    return make_error(Errc::invalid_field,
                      fmt::format("{}: peft_type is {}, not \"LORA\"", file, field("peft_type").dump()));
  if (!field("r").is_number_integer() || field("r").get<std::int64_t>() != o.lora.rank)
    return make_error(Errc::invalid_field, fmt::format("{}: r is {}, the policy's [policy.lora] rank {}", file,
                                                       field("r").dump(), o.lora.rank));
  if (!field("lora_alpha").is_number() || field("lora_alpha").get<double>() != o.lora.alpha)
    return make_error(Errc::invalid_field, fmt::format("{}: lora_alpha is {}, the policy's [policy.lora] alpha {}",
                                                       file, field("lora_alpha").dump(), o.lora.alpha));
  if (field("use_rslora") == true || field("use_dora") == true)
    return make_error(Errc::invalid_field, file + ": rsLoRA and DoRA adapters are not LoRA as the policy computes it");
  auto checkpoint = SafetensorsFile::open((fs::path(dir) / "adapter_model.safetensors").string());
  if (!checkpoint) return checkpoint.error();
  std::set<std::string> wanted;
  const auto adapters = model->hf_adapters();
  for (const auto& a : adapters)
    for (const auto& [which, view] : {std::pair{'A', a.A}, std::pair{'B', a.B}}) {
      const auto name = key_of(a.module, which);
      wanted.insert(name);
      const StTensor* t = checkpoint->find(name);
      if (!t)
        return make_error(
            Errc::invalid_field,
            fmt::format("{}: no tensor {} (the policy adapts {}: [policy.lora] targets)", dir, name, a.module));
      if (t->shape != view.sizes().vec())
        return make_error(Errc::invalid_field, fmt::format("{}: tensor {} is {}, the policy's {}", dir, name,
                                                           shape_text(t->shape), shape_text(view.sizes().vec())));
    }
  for (const auto& t : checkpoint->tensors())
    if (const auto& name = t.name; !wanted.count(name))
      return make_error(Errc::invalid_field, fmt::format("{}: tensor {} adapts what the policy does not ([policy.lora] "
                                                         "targets = [{}])",
                                                         dir, name, fmt::join(o.lora.targets, ", ")));
  torch::NoGradGuard guard;
  for (const auto& a : adapters)
    for (const auto& [which, view] : {std::pair{'A', a.A}, std::pair{'B', a.B}}) {
      auto values = st_to_f32(*checkpoint->find(key_of(a.module, which)));
      if (!values) return values.error();
      auto v = view;
      v.copy_(torch::from_blob(values->data(), v.sizes(), torch::kFloat32));
    }
  return {};
}

Result<void> load_init_adapter(MoETransformer& model, const std::string& init_adapter) {
  if (init_adapter.empty()) return {};
  if (!init_adapter.starts_with("peft:") || !model->options().lora_on())
    return make_error(Errc::config_range, "[policy] init_adapter = \"" + init_adapter +
                                              "\": a \"peft:DIR\" for a policy with [policy.lora]");
  const auto dir = init_adapter.substr(5);
  if (auto r = load_peft(model, dir); !r)
    return make_error(r.error().code, "[policy] init_adapter: " + r.error().message);
  return {};
}

}  // namespace rlx
