// A policy's parameters straight into a WeightSet message: what a learner
// publishes. One copy from wherever the parameters live (a GPU's memory
// too: copy_ converts the dtype and crosses from the device) into the
// message's recycled memory, hashed as it is written (messages/codec.hpp
// encode_weight_set). export_weights (weights_io.hpp) gives the same set
// as vectors, for code that reads the values.
#pragma once

#include <string>

#include <torch/torch.h>

#include "messages/codec.hpp"

namespace rlx {

// The set's tensors are in `dtype` (bf16: each parameter rounded as it is written).
EncodedWeightSet encode_module_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind,
                                       std::uint64_t created_unix_ns, std::string_view sender,
                                       WeightDType dtype = WeightDType::f32);

}  // namespace rlx
