#include "policy/weights_wire.hpp"

#include "policy/weights_io.hpp"

namespace rlx {

EncodedWeightSet encode_module_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind,
                                       std::uint64_t created_unix_ns, std::string_view sender, WeightDType dtype) {
  const auto params = module.named_parameters(true);
  WeightSetLayout layout;
  layout.version = version;
  layout.policy_kind = kind;
  layout.created_unix_ns = created_unix_ns;
  layout.dtype = dtype;
  for (const auto& p : params) layout.tensors.emplace_back(p.key(), p.value().sizes().vec());
  return encode_weight_set(
      layout,
      [&](std::size_t i, void* into, std::uint64_t first, std::uint64_t n) {
        copy_parameter_into(params[i].value(), into, dtype, first, static_cast<std::int64_t>(n));
      },
      sender);
}

}  // namespace rlx
