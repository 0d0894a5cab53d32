// The token policy (policy/moe_transformer.hpp): rollout sampling tokens/s
// with the KV cache against recomputing the whole prefix every step (same
// model, same batch, same samples), and the MoE layer's forward + backward
// against a dense layer of the same active parameter count, and the
// learner's GRPO step against the raw work of a step that computes every
// row and makes a separate proximal pass.
#include <fmt/format.h>

#include "bench/common.hpp"
#include "learner/token_losses.hpp"
#include "learner/token_trainer.hpp"
#include "policy/token_sampler.hpp"

namespace rlx {

namespace {

double sampling_tokens_per_s(MoETransformer& model, bool cache, std::int64_t batch, std::int64_t prompt,
                             std::int64_t steps) {
  SampleOptions o;
  o.max_new_tokens = steps;
  o.eos = -1;  // never ends: exactly `steps` tokens per row
  o.use_cache = cache;
  std::vector<std::vector<std::int64_t>> prompts(batch, std::vector<std::int64_t>(prompt, 5));
  std::mt19937_64 rng(1);
  const auto t = Clock::now();
  generate(model, prompts, o, rng);
  return static_cast<double>(batch * steps) / seconds_since(t);
}

// Forward + backward of `layer` on x, seconds (median of `rounds`).
template <typename F>
double fwd_bwd_s(F&& step, int rounds) {
  std::vector<double> s;
  for (int i = 0; i < rounds + 1; ++i) {
    const auto t = Clock::now();
    step();
    if (i > 0) s.push_back(seconds_since(t));  // the first is warm-up
  }
  return median(s);
}

// One GRPO update of 64 rows (8 groups of 8; 3 groups scored alike, about
// the share a run from the supervised start sees) against the raw work of
// the step that computed every row: a no-grad pass for the proximal
// log-probs, then forward + backward, over the same microbatches.
Row grpo_step_row() {
  TokenTrainerOptions o;
  o.model = TransformerOptions{};  // the code policy
  const std::int64_t B = 64, G = 8, P = 96, T = 64;
  SampleOptions so;
  so.max_new_tokens = T;
  so.eos = -1;
  std::mt19937_64 rng(3);
  std::vector<double> step_s, raw_s;
  for (int round = 0; round < 4; ++round) {
    TokenTrainer trainer(o);
    TokenBatch batch;
    batch.group_size = G;
    batch.sequences = generate(trainer.model(), std::vector<std::vector<std::int64_t>>(B, std::vector<std::int64_t>(P, 5)),
                               so, rng);
    for (std::int64_t b = 0; b < B; ++b) batch.rewards.push_back(b < 3 * G ? 1.0F : static_cast<float>(b % 3) / 2);
    auto t = Clock::now();
    trainer.rl_step(batch);
    const double step = seconds_since(t);
    auto& model = trainer.model();
    const auto& g = batch.sequences;
    std::vector<std::int64_t> width(B, g.tokens.size(1));
    t = Clock::now();
    for (const auto& mb : pack_by_length(width, o.token_budget)) {
      auto idx = torch::tensor(mb, torch::kLong);
      auto tokens = g.tokens.index_select(0, idx), valid = g.valid.index_select(0, idx);
      {
        torch::NoGradGuard guard;
        model->forward(tokens, valid);
      }
      torch::log_softmax(model->forward(tokens, valid).logits, -1).mean().backward();
    }
    const double raw = seconds_since(t);
    if (round > 0) step_s.push_back(step), raw_s.push_back(raw);  // the first is warm-up
  }
  const double s = median(step_s), r = median(raw_s);
  return {fmt::format("GRPO update ({} rows, {} groups of {}, 3 scored alike, {} tokens each)", B, B / G, G, P + T),
          fmt::format("{:.0f} ms", s * 1e3), fmt::format("{:.0f} ms: every row, proximal pass apart", r * 1e3),
          fmt::format("{:.2f}", s / r), "rows of zero advantage skipped; the proximal log-probs are epoch 0's own"};
}

}  // namespace

std::vector<Row> bench_tokens() {
  std::vector<Row> rows;
  TransformerOptions mo;  // the code policy
  auto model = make_seeded_transformer(mo, 1);
  const std::int64_t B = 16, P = 96, T = 64;
  std::vector<double> cached, plain;
  for (int round = 0; round < 3; ++round) {
    cached.push_back(sampling_tokens_per_s(model, true, B, P, T));
    plain.push_back(sampling_tokens_per_s(model, false, B, P, T));
  }
  const double c = median(cached), p = median(plain);
  rows.push_back({fmt::format("token sampling, KV cache ({} rows, prompt {}, {} new)", B, P, T),
                  fmt::format("{:.0f} tokens/s", c), fmt::format("{:.0f} tokens/s without the cache", p),
                  fmt::format("{:.2f}", c / p),
                  fmt::format("d_model {}, {} layers, {} experts top-{}", mo.d_model, mo.layers, mo.experts, mo.top_k)});

  // MoE (E experts of hidden h, top-k) vs a dense MLP of hidden k*h: the
  // same parameters per token.
  const std::int64_t d = 128, h = 256, E = 8, k = 2, N = 4096;
  MoELayer moe(MoEOptions{d, h, d, E, k, true, 0});
  torch::nn::Sequential dense(torch::nn::Linear(d, k * h), torch::nn::GELU(),
                              torch::nn::Linear(k * h, d));
  auto x = torch::randn({N, d});
  const double t_moe = fwd_bwd_s([&] { moe->forward(x).y.sum().backward(); }, 5);
  const double t_dense = fwd_bwd_s([&] { dense->forward(x).sum().backward(); }, 5);
  rows.push_back({fmt::format("MoE layer forward+backward ({} tokens, {} experts top-{})", N, E, k),
                  fmt::format("{:.2f} ms", t_moe * 1e3),
                  fmt::format("{:.2f} ms dense, hidden {}", t_dense * 1e3, k * h), fmt::format("{:.2f}", t_moe / t_dense),
                  fmt::format("same active parameters per token; the MoE holds {}x the expert parameters", E / k)});
  rows.push_back(grpo_step_row());
  return rows;
}

}  // namespace rlx
