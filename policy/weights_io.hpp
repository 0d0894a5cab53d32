// Moving a module's parameters to and from a WeightSetData.
#pragma once

#include <torch/torch.h>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

// Copies every parameter (in registration order) into a weight set.
WeightSetData export_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind);

// Copies a weight set into `module`. Every name and shape must match;
// on mismatch nothing is changed and an invalid_field error is returned.
Result<void> import_weights(torch::nn::Module& module, const WeightSetData& weights);

// xxh64 over all parameters (as export_weights would checksum them).
std::uint64_t weights_checksum(const torch::nn::Module& module);

}  // namespace rlx
