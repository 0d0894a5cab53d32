// Moving a module's parameters to and from a WeightSetData.
#pragma once

#include <torch/torch.h>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

// Writes parameter `v`'s values as fp32 into `into` (v.numel() floats),
// in one copy: an fp32 CPU parameter's bytes as they are, any other
// through copy_, which converts the dtype and crosses from the device.
// What export_weights and encode_module_weights (weights_wire.hpp) do
// with each parameter.
void copy_parameter_into(const torch::Tensor& v, float* into);

// Copies every parameter (in registration order) into a weight set.
WeightSetData export_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind);

// Copies a weight set into `module`. Every name and shape must match;
// on mismatch nothing is changed and an invalid_field error is returned.
Result<void> import_weights(torch::nn::Module& module, const WeightSetData& weights);

// xxh64 over all parameters (as export_weights would checksum them).
std::uint64_t weights_checksum(const torch::nn::Module& module);

}  // namespace rlx
