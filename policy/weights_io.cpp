#include "policy/weights_io.hpp"

#include <cstring>

namespace rlx {

torch::ScalarType torch_dtype(WeightDType dtype) {
  return dtype == WeightDType::bf16 ? torch::kBFloat16 : torch::kFloat32;
}

void copy_parameter_into(const torch::Tensor& v, void* into, WeightDType dtype, std::uint64_t first, std::int64_t n) {
  torch::NoGradGuard guard;
  const auto type = torch_dtype(dtype);
  const auto at = static_cast<std::int64_t>(first), count = n < 0 ? v.numel() - at : n;
  if (v.is_cpu() && v.scalar_type() == type && v.is_contiguous())
    std::memcpy(into, static_cast<const char*>(v.data_ptr()) + at * v.element_size(),
                static_cast<std::size_t>(count) * v.element_size());
  else
    torch::from_blob(into, {count}, type).copy_(v.detach().reshape({-1}).narrow(0, at, count));
}

WeightSetData export_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind,
                             WeightDType dtype) {
  WeightSetData w;
  w.version = version;
  w.policy_kind = kind;
  torch::NoGradGuard guard;
  for (const auto& p : module.named_parameters(true)) {
    // Straight into the set's own values. (A CPU tensor first, then the
    // vector, touched the fresh memory twice: an H200 learner's fp32
    // export of 677 MB took 1.9x as long; docs/BENCHMARKS.md "On a GPU".)
    const auto& v = p.value();
    NamedTensor nt;
    nt.name = p.key();
    nt.shape = v.sizes().vec();
    nt.dtype = dtype;
    const auto n = static_cast<std::size_t>(v.numel());
    if (dtype == WeightDType::bf16) {
      nt.bf16.resize(n);
      copy_parameter_into(v, nt.bf16.data(), dtype);
    } else {
      nt.values.resize(n);
      copy_parameter_into(v, nt.values.data(), dtype);
    }
    w.tensors.push_back(std::move(nt));
  }
  w.checksum = w.compute_checksum();
  return w;
}

namespace {

Result<void> check_fits(const torch::OrderedDict<std::string, torch::Tensor>& params, const WeightSetData& weights) {
  if (params.size() != weights.tensors.size())
    return make_error(Errc::invalid_field, "weight set has " + std::to_string(weights.tensors.size()) +
                                               " tensors, the policy " + std::to_string(params.size()));
  std::size_t i = 0;
  for (const auto& p : params) {
    const auto& t = weights.tensors[i++];
    if (t.name != p.key() || t.shape != p.value().sizes().vec())
      return make_error(Errc::invalid_field, "weight tensor " + t.name + " does not fit parameter " + p.key());
  }
  return {};
}

}  // namespace

Result<void> view_weights(torch::nn::Module& module, const WeightSetData& weights) {
  auto params = module.named_parameters(true);
  if (auto ok = check_fits(params, weights); !ok) return ok;
  torch::NoGradGuard guard;
  std::size_t i = 0;
  for (auto& p : params) {
    const auto& t = weights.tensors[i++];
    auto& v = p.value();
    auto* data = const_cast<void*>(t.bytes());  // never written: see the header
    const auto type = torch_dtype(t.dtype);
    if (t.is_view() && v.is_cpu() && v.scalar_type() == type) {
      auto keep = t.keeper();
      v.set_data(torch::from_blob(data, v.sizes(), [keep](void*) {}, type));
    } else {
      v.set_data(torch::from_blob(data, v.sizes(), type).to(v.options(), false, true));
    }
  }
  return {};
}

void release_weights(torch::nn::Module& module) {
  torch::NoGradGuard guard;
  for (auto& p : module.parameters(true)) p.set_data(torch::zeros({}, p.options()).expand(p.sizes()));
}

Result<void> import_weights(torch::nn::Module& module, const WeightSetData& weights) {
  auto params = module.named_parameters(true);
  if (auto ok = check_fits(params, weights); !ok) return ok;
  torch::NoGradGuard guard;
  std::size_t i = 0;
  for (auto& p : params) {
    const auto& t = weights.tensors[i++];
    auto src = torch::from_blob(const_cast<void*>(t.bytes()), p.value().sizes(), torch_dtype(t.dtype));
    p.value().copy_(src);
  }
  return {};
}

std::uint64_t weights_checksum(const torch::nn::Module& module) { return export_weights(module, 0, "").checksum; }

}  // namespace rlx
