#include "policy/weights_wire.hpp"

#include <cstring>

namespace rlx {

EncodedWeightSet encode_module_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind,
                                       std::uint64_t created_unix_ns, std::string_view sender) {
  const auto params = module.named_parameters(true);
  WeightSetLayout layout;
  layout.version = version;
  layout.policy_kind = kind;
  layout.created_unix_ns = created_unix_ns;
  for (const auto& p : params) layout.tensors.emplace_back(p.key(), p.value().sizes().vec());
  torch::NoGradGuard guard;
  return encode_weight_set(
      layout,
      [&](std::size_t i, float* into, std::size_t n) {
        const auto& v = params[i].value();
        if (v.is_cpu() && v.scalar_type() == torch::kFloat32 && v.is_contiguous())
          std::memcpy(into, v.data_ptr<float>(), n * sizeof(float));
        else
          torch::from_blob(into, v.sizes(), torch::kFloat32).copy_(v.detach());
      },
      sender);
}

}  // namespace rlx
