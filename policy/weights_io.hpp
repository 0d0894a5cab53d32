// Moving a module's parameters to and from a WeightSetData.
#pragma once

#include <torch/torch.h>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

// The tensor element type of a weight dtype (fp32, bf16), and back.
torch::ScalarType torch_dtype(WeightDType dtype);

// Writes parameter `v`'s values in `dtype` into `into` (v.numel() values),
// in one copy: a CPU parameter already of that dtype as its bytes are,
// any other through copy_, which converts the dtype (rounding to the
// nearest bf16, as Tensor::to does) and crosses from the device. What
// export_weights and encode_module_weights (weights_wire.hpp) do with
// each parameter. With `first` and `n` (>= 0), values [first, first + n)
// of it, row-major (a weight set's entry of a tensor that travels in rows).
void copy_parameter_into(const torch::Tensor& v, void* into, WeightDType dtype = WeightDType::f32,
                         std::uint64_t first = 0, std::int64_t n = -1);

// Copies every parameter (in registration order) into a weight set, its
// tensors in `dtype`.
WeightSetData export_weights(const torch::nn::Module& module, std::uint64_t version, const std::string& kind,
                             WeightDType dtype = WeightDType::f32);

// Copies a weight set into `module` (converting the set's dtype to the
// parameters' where they differ). Every name and shape must match;
// on mismatch nothing is changed and an invalid_field error is returned.
Result<void> import_weights(torch::nn::Module& module, const WeightSetData& weights);

// Points `module`'s parameters at a weight set's own bytes, for a module
// that only reads them (an explorer's policy): each CPU parameter of the
// tensor's dtype becomes a view of its tensor in the set's message, kept
// alive by it (no copy at all); a tensor the set holds in a vector of its
// own, or a parameter elsewhere than on the CPU or in another dtype, gets
// fresh memory of its own with the values (in the parameter's dtype). Nothing is ever written through a parameter into
// the set: a module given view_weights must not be written in place
// (import_weights copies into the parameters: for a trainer's model, never
// after view_weights). Checks as import_weights does; on a mismatch
// nothing changes.
Result<void> view_weights(torch::nn::Module& module, const WeightSetData& weights);

// Lets go of what `module`'s parameters hold (the weight set they view,
// after view_weights): each becomes a view of one zero, its shape kept,
// so that a set nothing else holds is freed. The module reads zeros until
// it is given weights again (view_weights or import_weights). What a
// module that scores a version now and then (the evaluator) does between
// versions, so that it never keeps one the weight store has let go.
void release_weights(torch::nn::Module& module);

// xxh64 over all parameters (as export_weights would checksum them).
std::uint64_t weights_checksum(const torch::nn::Module& module);

}  // namespace rlx
