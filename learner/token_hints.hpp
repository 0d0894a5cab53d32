// The hint distillation of the token trainer (TokenTrainerOptions::hint_coef):
// a failed row's completion is scored twice, by the policy with the
// scorer's hint in its prompt (the teacher) and without (the student),
// and KL(teacher || student) pulls the student towards the teacher.
// CAF-free; used by learner/token_trainer.cpp only.
#pragma once

#include <cstdint>
#include <vector>

#include "learner/token_trainer.hpp"

namespace rlx {

// Hinted rows `picked` of a batch, for the hint distillation: the student
// rows (prompt + completion as sampled) and the teacher rows (the prompt
// with its hint + the completion), each left-padded so that both end with the
// completion; `mask` [n, L] marks, over the last L columns, each row's
// completion tokens that are fresh enough to train on.
struct HintRows {
  torch::Tensor student, student_valid, teacher, teacher_valid, mask;
  std::int64_t L = 0;
};

HintRows hint_rows(const Generation& g, const torch::Tensor& admitted,
                   const std::vector<std::vector<std::int64_t>>& teacher_prompts, const std::vector<std::int64_t>& picked);

struct HintPart {
  HintRows rows;
  std::int64_t n = 0;
};

// The batch's hinted rows whose teacher row fits the context, in
// microbatches by teacher width; `tokens`: the completion tokens they train.
std::vector<HintPart> hint_parts(const TokenTrainerOptions& o, const TokenBatch& batch, const torch::Tensor& admitted,
                                 const torch::Device& device, std::int64_t& tokens);

// KL(teacher || student) over the completion: the teacher's distribution
// (hint in context, no gradient) pulls the student's (no hint) towards it.
double distil(MoETransformer& model, const TokenTrainerOptions& o, const HintPart& p, std::int64_t total_tokens);

}  // namespace rlx
