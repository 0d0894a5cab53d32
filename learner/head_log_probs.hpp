// The log-probabilities a learner trains on, from a transformer's logits
// or a chunk of positions at a time through its output layer. CAF-free.
//
// The loss's [tokens, vocab] tensors (the logits, their log-softmax, the
// entropy's terms, kept for the backward) are the largest part of what a
// learner holds once the vocabulary is a real one's: 0.6 MB a token at
// 32 k ids, 2.9 MB at Qwen's 152 k, several GB for a microbatch of a few
// thousand tokens. head_log_probs holds one chunk of them at a time: the
// forward keeps only the final hidden states, and the backward computes
// each chunk's logits again (one more pass through the output layer, a
// few percent of a step) for its gradients.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "policy/moe_transformer.hpp"
#include "policy/rule_masks.hpp"

namespace rlx {

// log p(token_j | tokens_<j) for every column j >= 1 of tokens [B, W]
// (column 0: 0), at `temperature`, under the decoding rule's `blocked`
// tokens, and the entropy of each of those distributions, from logits
// [B, W, V]. Both [B, W] fp32.
std::pair<torch::Tensor, torch::Tensor> token_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens,
                                                        double temperature, const BlockedTokens& blocked = {});

// The same from `hidden` [B, W, d] (TransformerOutput::hidden, the final
// norm's output) through `model`'s output layer, `chunk_logits` logits at
// a time (at least one position a chunk). Differentiable in `hidden` and
// the output layer's trained parameters (lm_head, its adapters, or the tied
// embedding), whose gradients are summed over chunks and accumulated as
// autograd does; equal to token_log_probs of the model's logits to
// rounding.
std::pair<torch::Tensor, torch::Tensor> head_log_probs(MoETransformer& model, const torch::Tensor& hidden,
                                                       const torch::Tensor& tokens, double temperature,
                                                       const BlockedTokens& blocked = {},
                                                       std::int64_t chunk_logits = std::int64_t{1} << 23);

}  // namespace rlx
