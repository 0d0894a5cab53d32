#include "learner/token_hints.hpp"

#include "learner/token_losses.hpp"

namespace rlx {

HintRows hint_rows(const Generation& g, const torch::Tensor& admitted,
                   const std::vector<std::vector<std::int64_t>>& teacher_prompts, const std::vector<std::int64_t>& picked) {
  const auto P = g.prompt_width;
  const auto n = static_cast<std::int64_t>(picked.size());
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto val = g.valid.accessor<bool, 2>();
  auto adm = admitted.accessor<bool, 2>();
  std::vector<std::vector<std::int64_t>> student(n), teacher(n);
  std::int64_t Ws = 0, Wt = 0, L = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto b = picked[i];
    const auto len = g.lengths[b];
    for (std::int64_t c = 0; c < P + len; ++c)
      if (c >= P || val[b][c]) student[i].push_back(tok[b][c]);
    teacher[i] = teacher_prompts[b];
    for (std::int64_t c = P; c < P + len; ++c) teacher[i].push_back(tok[b][c]);
    Ws = std::max<std::int64_t>(Ws, static_cast<std::int64_t>(student[i].size()));
    Wt = std::max<std::int64_t>(Wt, static_cast<std::int64_t>(teacher[i].size()));
    L = std::max(L, len);
  }
  HintRows r;
  r.L = L;
  auto right_aligned = [n](const std::vector<std::vector<std::int64_t>>& seqs, std::int64_t W, torch::Tensor& tokens,
                           torch::Tensor& valid) {
    tokens = torch::zeros({n, W}, torch::kLong);
    valid = torch::zeros({n, W}, torch::kBool);
    auto t = tokens.accessor<std::int64_t, 2>();
    auto v = valid.accessor<bool, 2>();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto off = W - static_cast<std::int64_t>(seqs[i].size());
      for (std::size_t j = 0; j < seqs[i].size(); ++j) t[i][off + static_cast<std::int64_t>(j)] = seqs[i][j], v[i][off + static_cast<std::int64_t>(j)] = true;
    }
  };
  right_aligned(student, Ws, r.student, r.student_valid);
  right_aligned(teacher, Wt, r.teacher, r.teacher_valid);
  r.mask = torch::zeros({n, L}, torch::kBool);
  auto m = r.mask.accessor<bool, 2>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto b = picked[i], len = g.lengths[b];
    for (std::int64_t k = 0; k < len; ++k) m[i][L - len + k] = adm[b][P + k];
  }
  return r;
}

std::vector<HintPart> hint_parts(const TokenTrainerOptions& o, const TokenBatch& batch, const torch::Tensor& admitted,
                                 const torch::Device& device, std::int64_t& tokens) {
  const auto& g = batch.sequences;
  std::vector<HintPart> parts;
  tokens = 0;
  if (o.hint_coef <= 0 || batch.teacher_prompts.empty()) return parts;
  const auto B = g.tokens.size(0);
  RLX_REQUIRE(static_cast<std::int64_t>(batch.teacher_prompts.size()) == B, batch.teacher_prompts.size(), B);
  std::vector<std::int64_t> picked, width;
  for (std::int64_t b = 0; b < B; ++b) {
    if (batch.teacher_prompts[b].empty()) continue;
    if (!batch.masked.empty() && batch.masked[static_cast<std::size_t>(b)]) continue;  // no outcome: no hint either
    const std::int64_t w = static_cast<std::int64_t>(batch.teacher_prompts[b].size()) + g.lengths[b];
    if (w > o.model.max_len) continue;
    picked.push_back(b);
    width.push_back(w);
  }
  for (const auto& mb : pack_by_length(width, o.microbatch_tokens())) {
    std::vector<std::int64_t> rows_of;
    for (auto i : mb) rows_of.push_back(picked[i]);
    HintPart p;
    p.rows = hint_rows(g, admitted, batch.teacher_prompts, rows_of);
    for (auto* t : {&p.rows.student, &p.rows.student_valid, &p.rows.teacher, &p.rows.teacher_valid, &p.rows.mask})
      *t = t->to(device);
    p.n = static_cast<std::int64_t>(rows_of.size());
    tokens += p.rows.mask.sum().item<std::int64_t>();
    parts.push_back(std::move(p));
  }
  return parts;
}

double distil(MoETransformer& model, const TokenTrainerOptions& o, const HintPart& p, std::int64_t total_tokens) {
  const auto& r = p.rows;
  const auto n_tokens = r.mask.sum().item<std::int64_t>();
  if (n_tokens == 0) return 0;
  torch::Tensor teacher_logp;
  {
    torch::NoGradGuard guard;
    auto t = model->forward(r.teacher, r.teacher_valid);
    const auto Wt = r.teacher.size(1);
    teacher_logp = torch::log_softmax(t.logits.narrow(1, Wt - 1 - r.L, r.L) / o.temperature, -1);
  }
  auto s = model->forward(r.student, r.student_valid);
  const auto Ws = r.student.size(1);
  auto student_logp = torch::log_softmax(s.logits.narrow(1, Ws - 1 - r.L, r.L) / o.temperature, -1);
  auto kl = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1);  // [n, L]
  auto kl_sum = (kl * r.mask.to(kl.dtype())).sum();
  (o.hint_coef * kl_sum / static_cast<double>(total_tokens)).backward();
  return kl_sum.item<double>();
}

}  // namespace rlx
