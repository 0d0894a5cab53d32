#include "tools/sft_cmd.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "explorers/token_eval.hpp"
#include "learner/token_trainer.hpp"
#include "learner/trainer.hpp"
#include "policy/threads.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void report(const char* when, int step, const TokenEvaluation& ev) {
  std::printf("%s step %d: held-out pass@1 %.3f (mean tests passed %.3f, %d tasks%s)\n", when, step, ev.pass_at_1,
              ev.mean_score, ev.tasks, ev.unscored ? ", some unscored" : "");
  std::printf("  by family: %s\n", family_summary(ev).c_str());
  for (const auto& s : ev.samples) std::printf("  e.g. %s\n", s.c_str());
  std::fflush(stdout);
}

// The trained model on the CPU: the trainer's own, or a copy of its
// weights when it trains on a GPU (the evaluator decodes on the CPU, and a
// saved file must load on any machine).
MoETransformer on_cpu(TokenTrainer& trainer) {
  if (trainer.device().is_cpu()) return trainer.model();
  auto copy = make_seeded_transformer(trainer.options().model, trainer.options().seed);
  auto ok = import_weights(*copy, trainer.weights());
  RLX_REQUIRE(ok.ok(), ok.error().message);
  return copy;
}

// Writes the model to `path` through a temporary file, so that the file
// is always a whole checkpoint (a run stopped while writing keeps the
// previous one).
bool save(TokenTrainer& trainer, const std::string& path) {
  try {
    const std::filesystem::path out(path);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    const std::string partial = path + ".partial";
    torch::save(on_cpu(trainer), partial);
    std::filesystem::rename(partial, out);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx sft: could not write %s: %s\n", path.c_str(), e.what());
    return false;
  }
}

}  // namespace

int sft_command(const SftArgs& a) {
  if (!make_token_task(a.kind, 0)) {
    std::fprintf(stderr, "rlx sft: %s\n", make_token_task(a.kind, 0).error().message.c_str());
    return 2;
  }
  auto scorer = make_scorer(scorer_for(a.kind));
  if (!scorer) {
    std::fprintf(stderr, "rlx sft: no scorer for %s tasks here: %s\n", a.kind.c_str(), scorer.error().message.c_str());
    return 2;
  }
  if (auto d = check_device(a.device); !d) {
    std::fprintf(stderr, "rlx sft: %s\n", d.error().message.c_str());
    return 2;
  }
  configure_compute_threads(a.threads);
  TokenTrainerOptions o;
  o.lr = a.lr;
  o.seed = a.seed;
  o.device = a.device;
  TokenTrainer trainer(o);
  TokenEvalOptions eo;
  eo.kind = a.kind;
  eo.tasks = a.eval_tasks;
  auto evaluate = [&] {
    auto model = on_cpu(trainer);
    return evaluate_tokens(model, **scorer, eo);
  };
  report("before training,", 0, evaluate());

  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
  const auto start = std::chrono::steady_clock::now();
  std::int64_t tokens = 0;
  double loss = 0;
  for (int step = 1; step <= a.steps; ++step) {
    std::vector<std::vector<std::int64_t>> prompts, completions;
    for (int i = 0; i < a.batch; ++i) {
      auto t = make_token_task(a.kind, draw(rng));
      // Every other prompt holds a hint (what hint distillation's teacher reads).
      const auto prompt = Tokenizer::encode(t->prompt);
      prompts.push_back(i % 2 ? hinted_prompt(prompt, t->hint) : prompt);
      completions.push_back(Tokenizer::encode(t->reference));
    }
    auto s = trainer.sft_step(prompts, completions);
    tokens += s.tokens;
    loss = s.policy_loss;
    if (step % 20 == 0 || step == a.steps) {
      std::printf("step %d/%d  loss %.4f per token  %.0f tokens/s  %.0f s\n", step, a.steps, loss,
                  static_cast<double>(tokens) / since(start), since(start));
      std::fflush(stdout);
    }
    if (a.eval_every > 0 && step % a.eval_every == 0 && step != a.steps) {
      // The checkpoint so far goes with each evaluation: a run stopped
      // early keeps the progress it reported.
      if (!save(trainer, a.out)) return 2;
      report("at", step, evaluate());
    }
  }
  report("after training,", a.steps, evaluate());
  if (!save(trainer, a.out)) return 2;
  std::printf("weights written to %s\n", a.out.c_str());
  return 0;
}

}  // namespace rlx
