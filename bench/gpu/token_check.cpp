// rlx-gpu-token-check: the token policy's learner (learner/token_trainer.hpp)
// on a device, for bench/gpu/run.sh. Checks that GRPO and PPO updates
// (2 epochs, stale tokens, skipped rows, hint distillation) on the device
// give the CPU trainer's weights from the same start and batches, then
// times the code policy's GRPO update (64 rows x 160 tokens, fp32, as the
// learner trains it) on the device against the CPU in the same run.
// Writes table rows to --md. Exit 0: the checks held; 2: no such device.
//
//   rlx-gpu-token-check --device cuda [--md results.md] [--quick]
//
// --quick: the check on a small batch only (what the CPU test suite runs).
#include <cstdio>
#include <random>
#include <string>

#include <torch/torch.h>

#include "bench/timing.hpp"
#include "learner/token_trainer.hpp"
#include "policy/token_sampler.hpp"

using namespace rlx;

namespace {

// Sampled rows with rewards that sometimes agree within a group (GRPO
// skips those), the first decoding step 5 versions behind `version` (past
// the bound of 4), and a hint in the teacher's prompt of each failed row.
TokenBatch make_batch(MoETransformer& sampler, std::int64_t rows, std::int64_t prompt, std::int64_t new_tokens,
                      std::uint64_t version, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  SampleOptions s;
  s.max_new_tokens = new_tokens;
  std::vector<std::vector<std::int64_t>> prompts;
  for (std::int64_t b = 0; b < rows; b += 2) {
    std::vector<std::int64_t> p;
    const auto len = prompt - static_cast<std::int64_t>(rng() % 3);
    for (std::int64_t k = 0; k < len; ++k) p.push_back(3 + static_cast<std::int64_t>(rng() % 95));
    prompts.push_back(p);
    prompts.push_back(p);
  }
  TokenBatch batch;
  batch.group_size = 2;
  batch.sequences = generate(sampler, prompts, s, rng, [&](std::int64_t step) {
    return version - 5 + static_cast<std::uint64_t>(std::min<std::int64_t>(step, 5));
  });
  for (std::int64_t b = 0; b < rows; ++b) {
    batch.rewards.push_back(static_cast<float>(rng() % 3) / 2.0f);
    auto teacher = prompts[static_cast<std::size_t>(b)];
    if (batch.rewards.back() == 0.0f) teacher.insert(teacher.end(), {40, 41, 42});
    batch.teacher_prompts.push_back(batch.rewards.back() == 0.0f ? teacher : std::vector<std::int64_t>{});
  }
  return batch;
}

double max_diff(const WeightSetData& a, const WeightSetData& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    for (std::size_t j = 0; j < a.tensors[i].values.size(); ++j)
      d = std::max(d, static_cast<double>(std::abs(a.tensors[i].values[j] - b.tensors[i].values[j])));
  return d;
}

bool check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda", md;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = argv[++i];
    else if (a == "--md" && i + 1 < argc) md = argv[++i];
    else if (a == "--quick") quick = true;
    else return std::printf("usage: rlx-gpu-token-check [--device D] [--md FILE] [--quick]\n"), 2;
  }
  try {
    const torch::Device d(device);
    if (d.is_cuda() && !torch::cuda::is_available())
      return std::printf("rlx-gpu-token-check: device %s needs a visible GPU and a CUDA LibTorch\n", device.c_str()), 2;
  } catch (const c10::Error& e) {
    return std::printf("rlx-gpu-token-check: device %s: %s\n", device.c_str(), e.what_without_backtrace()), 2;
  }
  FILE* out = md.empty() ? nullptr : std::fopen(md.c_str(), "a");
  bool ok = true;

  for (const std::string algorithm : {"grpo", "ppo"}) {
    TokenTrainerOptions o;
    o.model.vocab = 99;
    o.model.d_model = 64;
    o.model.heads = 4;
    o.model.layers = 2;
    o.model.max_len = 64;
    o.model.experts = 4;
    o.model.expert_hidden = 64;
    o.algorithm = *rlx::choice_of<rlx::Algorithm>(algorithm);
    o.epochs = 2;
    o.lr = 1e-3;
    o.hint_coef = 0.5;
    o.seed = 5;
    TokenTrainer cpu(o);
    auto on_device = o;
    on_device.device = device;
    TokenTrainer dev(on_device);
    auto sampler = make_seeded_transformer(o.model, 9);
    cpu.set_version(10);
    dev.set_version(10);
    bool same_counts = true;
    double loss_gap = 0;
    for (int k = 0; k < 3; ++k) {
      const auto batch = make_batch(sampler, 16, 8, 12, 10 + static_cast<std::uint64_t>(k), 70 + static_cast<std::uint64_t>(k));
      const auto a = cpu.rl_step(batch);
      const auto b = dev.rl_step(batch);
      same_counts &= a.tokens == b.tokens && a.stale_tokens == b.stale_tokens && a.skipped_rows == b.skipped_rows &&
                     a.hinted_rows == b.hinted_rows && a.tokens > 0 && a.stale_tokens > 0 && a.hinted_rows > 0;
      loss_gap = std::max(loss_gap, std::abs(a.policy_loss - b.policy_loss));
    }
    const double gap = max_diff(cpu.weights(), dev.weights());
    ok &= check(same_counts, algorithm + " on " + device + ": the same tokens, stale tokens, skipped and hinted rows");
    ok &= check(gap < 1e-3 && loss_gap < 1e-3, algorithm + " on " + device + ": weights within " + std::to_string(gap) +
                                                    " of the CPU trainer's after 3 updates (loss within " +
                                                    std::to_string(loss_gap) + ")");
    if (out)
      std::fprintf(out, "| token learner %s on %s vs CPU, 3 updates x 2 epochs (stale tokens, hints) | max weight gap %.2g | 0 | | %s |\n",
                   algorithm.c_str(), device.c_str(), gap, gap < 1e-3 ? "agrees" : "DIFFERS");
  }

  if (!quick) {
    // The code policy's GRPO update, as bench_tokens' row: 64 rows of
    // 96 + 64 tokens, 8 groups of 8, 3 of them scored alike.
    TokenTrainerOptions o;  // the code policy
    auto on_device = o;
    on_device.device = device;
    const std::int64_t B = 64, G = 8, P = 96, T = 64;
    SampleOptions so;
    so.max_new_tokens = T;
    so.eos = -1;
    std::mt19937_64 rng(3);
    auto sampler = make_seeded_transformer(o.model, 1);
    TokenBatch batch;
    batch.group_size = G;
    batch.sequences = generate(sampler, std::vector<std::vector<std::int64_t>>(B, std::vector<std::int64_t>(P, 5)), so, rng);
    for (std::int64_t b = 0; b < B; ++b) batch.rewards.push_back(b < 3 * G ? 1.0F : static_cast<float>(b % 3) / 2);
    // Each step sees the batch as freshly sampled (set_version(0)): the
    // same batch past the staleness bound (max_lag) would train on no
    // token at all, and time an empty step.
    std::int64_t untrained_steps = 0;
    auto time_steps = [&](TokenTrainer& t, int steps, bool cuda) {
      t.rl_step(batch);  // warm-up
      std::vector<double> xs;
      for (int i = 0; i < steps; ++i) {
        t.set_version(0);
        const auto t0 = Clock::now();
        const auto st = t.rl_step(batch);
        if (cuda) torch::cuda::synchronize();
        xs.push_back(seconds_since(t0));
        untrained_steps += st.tokens == 0;
      }
      return median(xs);
    };
    TokenTrainer cpu(o), dev(on_device);
    const double c = time_steps(cpu, 3, false);
    const double g = time_steps(dev, 10, torch::Device(device).is_cuda());
    ok &= check(untrained_steps == 0, "every timed GRPO update trained on tokens");
    const double tokens = static_cast<double>(B * (P + T));
    std::printf("code policy GRPO update: %s %.1f ms, cpu %.1f ms (%d threads)\n", device.c_str(), g * 1e3, c * 1e3,
                torch::get_num_threads());
    if (out)
      std::fprintf(out, "| token learner GRPO update, code policy, fp32, on %s (64 rows x 160 tokens) | %.1f ms (%.0f tokens/s) | %.0f ms on the CPU (%d threads) | %.1fx | learner/token_trainer.cpp as a run trains it |\n",
                   device.c_str(), g * 1e3, tokens / g, c * 1e3, torch::get_num_threads(), c / g);
  }
  if (out) std::fclose(out);
  return ok ? 0 : 1;
}
