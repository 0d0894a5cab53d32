#include "tools/sft_cmd.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "core/config.hpp"
#include "core/progress.hpp"
#include "core/topology_paths.hpp"
#include "envs/code/sandbox.hpp"
#include "envs/env.hpp"
#include "envs/tokens/token_env.hpp"
#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/edit_names.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/token_eval.hpp"
#include "explorers/token_rollout.hpp"
#include "learner/checkpoint.hpp"
#include "learner/token_trainer.hpp"
#include "learner/trainer.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/threads.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void report(const char* when, int step, double seconds, const TokenEvaluation& ev) {
  std::printf("%s step %d: held-out pass@1 %.3f (mean tests passed %.3f, %d tasks%s), %.0f s in\n", when, step,
              ev.pass_at_1, ev.mean_score, ev.tasks, ev.unscored ? ", some unscored" : "", seconds);
  if (ev.train_tasks > 0)
    std::printf("  fresh training tasks pass@1 %.3f (mean tests passed %.3f, %d tasks); per episode %.1f turns, %.1f tool "
                "calls, %.1f bad calls; a hole's file opened in %.2f of held-out and %.2f of fresh training episodes, "
                "a hole's body rewritten in %.2f and %.2f\n",
                ev.train_pass_at_1, ev.train_mean_score, ev.train_tasks, ev.mean_turns, ev.mean_tool_calls,
                ev.mean_bad_calls, ev.found_hole, ev.train_found_hole, ev.rewrote_hole, ev.train_rewrote_hole);
  if (ev.train_tasks > 0)
    std::printf("  how episodes ended, held-out: %s; fresh training: %s\n", outcome_summary(ev.outcomes).c_str(),
                outcome_summary(ev.train_outcomes).c_str());
  std::printf("  by family: %s\n", family_summary(ev).c_str());
  for (const auto& s : ev.samples) std::printf("  e.g. %s\n", s.c_str());
  // The first episode of each split, as played, each line marked.
  for (const auto& episode : ev.episodes) {
    std::printf("  episode:\n");
    for (std::size_t at = 0; at < episode.size();) {
      const auto end = std::min(episode.find('\n', at), episode.size());
      std::printf("  | %.*s\n", static_cast<int>(end - at), episode.data() + at);
      at = end + 1;
    }
  }
  std::fflush(stdout);
}

// The trained model on the CPU: the trainer's own, or a copy of its
// weights when it trains on a GPU (the evaluator decodes on the CPU, and a
// saved file must load on any machine).
MoETransformer on_cpu(TokenTrainer& trainer) {
  if (trainer.device().is_cpu()) return trainer.model();
  auto copy = make_unfilled_transformer(trainer.options().model, trainer.options().seed);  // every weight next
  auto ok = import_weights(*copy, trainer.weights());
  RLX_REQUIRE(ok.ok(), ok.error().message);
  return copy;
}

// The trained model as a run's explorers and evaluator hold it: on_cpu's
// for an fp32 policy, a copy in the policy's dtype otherwise (the
// trainer's parameters are fp32 master weights; a file keeps those).
MoETransformer as_decoded(TokenTrainer& trainer) {
  const auto& o = trainer.options().model;
  if (o.dtype == WeightDType::f32) return on_cpu(trainer);
  auto copy = make_unfilled_transformer(o, trainer.options().seed);  // every weight next
  torch::NoGradGuard guard;
  const auto from = trainer.model()->parameters();
  auto to = copy->parameters();
  for (std::size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);  // rounded, and off the device
  return copy;
}

// Writes the model to `path` through a temporary file, so that the file
// is always a whole checkpoint (a run stopped while writing keeps the
// previous one).
bool save(TokenTrainer& trainer, const std::string& path, const std::string& tokenizer) {
  if (const auto dir = hf_init_dir(path); !dir.empty()) {
    // A Hugging Face checkpoint (the next run's [policy] init = "hf:DIR").
    Result<void> r = make_error(Errc::config_range, "an hf: output needs a Qwen3-MoE policy ([policy] init = \"hf:DIR\")");
    if (trainer.options().model.arch == TransformerArch::hf) r = export_hf(on_cpu(trainer), dir);
    if (r) r = copy_tokenizer_files(tokenizer, dir);
    if (!r) std::fprintf(stderr, "rlx sft: could not write %s: %s\n", path.c_str(), r.error().message.c_str());
    return r.ok();
  }
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

// A batch of the expert's workspace transcripts: prompts, completions
// (turns and observations) and which completion tokens are observations.
// Transcripts that do not fit the budget or did not submit are skipped,
// and counted; a sandbox failure is an error (nothing to train on).
struct Transcripts {
  std::vector<std::vector<std::int64_t>> prompts, completions;
  std::vector<std::vector<std::uint8_t>> observed;
  std::vector<std::vector<std::uint8_t>> beside_edit;  // all but the turns that edit (@replace, @write): to score those alone
  int skipped = 0;

  // Takes `t` (turns targets, observations and mistaken turns context) when it fits `budget`
  // and, for a whole transcript (`drill` false), ended in a submit; else
  // counts it skipped. A drill ends at its fix, unplayed.
  void add(const Transcript& t, const Tokenizer& tokenizer, std::int64_t budget, bool drill = false) {
    std::vector<std::int64_t> completion;
    std::vector<std::uint8_t> marks, beside;
    for (std::size_t i = 0; i < t.parts.size(); ++i) {
      const auto ids = tokenizer.encode(t.parts[i]);
      completion.insert(completion.end(), ids.begin(), ids.end());
      marks.insert(marks.end(), ids.size(), !t.target(i));
      const bool edit = t.target(i) && (t.parts[i].starts_with("@replace ") || t.parts[i].starts_with("@write "));
      beside.insert(beside.end(), ids.size(), !edit);
    }
    if ((!drill && t.end != EpisodeEnd::submitted) || static_cast<std::int64_t>(completion.size()) > budget) {
      ++skipped;
      return;
    }
    prompts.push_back(tokenizer.encode(t.prompt));
    completions.push_back(std::move(completion));
    observed.push_back(std::move(marks));
    beside_edit.push_back(std::move(beside));
  }
};

Result<Transcripts> transcripts(const Sandbox& sandbox, const TokensConfig& tokens, const Tokenizer& tokenizer, int batch,
                                int drills, int recoveries, std::mt19937_64& rng) {
  Transcripts out;
  std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
  const auto limits = agent_options(tokens, false).limits;
  const auto too_long = [&](const char* what) {
    return make_error(Errc::config_range, std::string("the expert's ") + what + " do not fit [tokens] max_new_tokens = " +
                                              std::to_string(tokens.max_new_tokens) + " or max_turns");
  };
  for (int tries = 0; static_cast<int>(out.prompts.size()) < batch; ++tries) {
    if (tries > 8 * batch) return too_long("transcripts");
    const auto task = make_workspace_task(TaskSplit::train, draw(rng), static_cast<int>(tokens.difficulty));
    const Transcript t = expert_transcript(task, sandbox, limits);
    if (t.failure != InfraFailure::none)
      return make_error(Errc::env_failed, std::string("the sandbox failed playing the expert: ") + to_string(t.failure));
    out.add(t, tokenizer, tokens.max_new_tokens);
  }
  for (int tries = 0; static_cast<int>(out.prompts.size()) < batch + drills; ++tries) {
    if (tries > 8 * drills) return too_long("drills");
    const auto task = make_workspace_task(TaskSplit::train, draw(rng), 1);
    // Every other drill reads the hole's function alone (a short context: more of them per second).
    out.add(expert_drill(single_hole_task(task, rng() % task.functions.size()), sandbox, tries % 2 == 1), tokenizer,
            tokens.max_new_tokens, /*drill=*/true);
  }
  for (int tries = 0; static_cast<int>(out.prompts.size()) < batch + drills + recoveries; ++tries) {
    if (tries > 8 * recoveries) return too_long("recovery drills");
    const auto task = make_workspace_task(TaskSplit::train, draw(rng), 1);
    const auto hole = single_hole_task(task, rng() % task.functions.size());
    const auto mistake = static_cast<Mistake>(rng() % kMistakes);
    // A cut name that happens to be a real one refuses nothing: drawn again.
    if (auto t = recovery_drill(hole, sandbox, mistake, 1 + static_cast<int>(rng() % 3)))
      out.add(*t, tokenizer, tokens.max_new_tokens, /*drill=*/true);
  }
  return out;
}

// The expert's transcripts of the evaluator's tasks (held-out tasks 0..n-1
// and fresh training tasks, docs/workspace.md), to score teacher-forced:
// how likely the policy finds the expert's reads, names and fixes, which
// moves before pass@1 does. Scored, never trained on.
struct ExpertRows {
  Transcripts held_out, fresh;
};

Result<ExpertRows> expert_rows(const Sandbox& sandbox, const TokensConfig& tokens, const Tokenizer& tokenizer, int n) {
  ExpertRows rows;
  const auto limits = agent_options(tokens, false).limits;
  const auto tasks = workspace_eval_tasks(n, static_cast<int>(tokens.difficulty));
  for (const bool held : {true, false})
    for (const auto& task : held ? tasks.held_out : tasks.fresh) {
      const Transcript t = expert_transcript(task, sandbox, limits);
      if (t.failure != InfraFailure::none)
        return make_error(Errc::env_failed, std::string("the sandbox failed playing the expert: ") + to_string(t.failure));
      (held ? rows.held_out : rows.fresh).add(t, tokenizer, tokens.max_new_tokens);
    }
  return rows;
}

void report_expert_rows(TokenTrainer& trainer, ExpertRows& rows) {
  auto score = [&](Transcripts& t) {
    const auto n = t.prompts.size() + static_cast<std::size_t>(t.skipped);
    if (t.prompts.empty()) return fmt::format("none of {} transcripts within the budget", n);
    const auto all = trainer.sft_score(t.prompts, t.completions, t.observed);
    const auto edits = trainer.sft_score(t.prompts, t.completions, t.beside_edit);
    return fmt::format("loss {:.3f} per target token, the policy's top token in {:.3f}; in the edits alone {:.3f} and "
                       "{:.3f} ({} of {} transcripts within the budget)",
                       all.loss, all.accuracy, edits.loss, edits.accuracy, t.prompts.size(), n);
  };
  std::printf("  the expert's transcripts teacher-forced, held-out: %s; fresh training: %s\n", score(rows.held_out).c_str(),
              score(rows.fresh).c_str());
  std::fflush(stdout);
}

}  // namespace

int sft_command(const SftArgs& a) {
  std::string kind = a.kind;
  std::optional<ClusterConfig> config;
  std::string adapters;  // a LoRA run evaluated: its folder or checkpoint (--init)
  if (!a.config.empty()) {
    auto c = load_config(a.config, builtin_envs().names());
    if (!c) {
      std::fprintf(stderr, "rlx sft: %s\n", c.error().message.c_str());
      return 2;
    }
    if (!c->token_run()) {
      std::fprintf(stderr, "rlx sft: %s is not a token run (run.env = \"%s\")\n", a.config.c_str(), c->run.env.c_str());
      return 2;
    }
    config = *c;
    kind = token_env_kind(c->run.env);
    if (a.fresh && !a.init.empty()) {
      std::fprintf(stderr, "rlx sft: --fresh and --init name two starts: give one\n");
      return 2;
    }
    if (a.fresh && config->policy.init.starts_with("hf:")) {
      std::fprintf(stderr, "rlx sft: --fresh: [policy] init is a Hugging Face checkpoint, whose config.json gives the "
                           "policy's shape; start from a fresh one with rlx init-model --hf DIR, then --init hf:DIR\n");
      return 2;
    }
    if (config->policy.lora.rank > 0) {
      // Evaluation only: --init names the run (or checkpoint) whose adapters
      // and heads are evaluated over [policy] init's base.
      std::error_code ec;
      const bool run = !a.init.empty() && (std::filesystem::is_directory(a.init, ec) || is_checkpoint_file(a.init));
      if (a.steps > 0 || !run) {
        std::fprintf(stderr,
                     "rlx sft: trains every weight and writes them all; [policy.lora] is for RL runs over a frozen "
                     "base (docs/hf-models.md \"LoRA\"): train with a config without it, or evaluate a LoRA run "
                     "with --steps 0 --init RUN_DIR (its newest checkpoint's adapters over [policy] init)\n");
        return 2;
      }
      adapters = a.init;
      if (auto r = check_policy_init(config->policy, config->tokens); !r) {  // the base, read before anything runs
        std::fprintf(stderr, "rlx sft: [policy] init: %s\n", r.error().message.c_str());
        return 2;
      }
    }
    if (a.fresh) config->policy.init.clear();
    if (!a.init.empty() && adapters.empty()) config->policy.init = a.init;
    if (auto files = check_topology_paths(*config, {"policy.init", "tokens.tokenizer"}); !files) {
      std::fprintf(stderr, "rlx sft: %s%s\n", a.init.empty() ? "" : "--init: ", files.error().message.c_str());
      if (a.init.empty() && files.error().message.starts_with("policy.init"))
        std::fprintf(stderr, "rlx sft: to train that start from fresh weights: rlx sft --config %s --fresh ...\n",
                     a.config.c_str());
      return 2;
    }
  } else if (!a.init.empty() || a.fresh) {
    std::fprintf(stderr, "rlx sft: %s needs --config (the run it starts)\n", a.fresh ? "--fresh" : "--init");
    return 2;
  }
  auto tokenizer = Tokenizer::load(config ? config->tokens.tokenizer : "");
  if (!tokenizer) {
    std::fprintf(stderr, "rlx sft: %s\n", tokenizer.error().message.c_str());
    return 2;
  }
  const bool workspace = kind == "workspace";
  if (workspace && !config) {
    std::fprintf(stderr, "rlx sft: workspace episodes need --config (the policy's shape and the episodes' budget, "
                         "e.g. examples/agent.toml)\n");
    return 2;
  }
  if (!workspace && !make_token_task(kind, 0)) {
    std::fprintf(stderr, "rlx sft: %s\n", make_token_task(kind, 0).error().message.c_str());
    return 2;
  }
  auto scorer = make_scorer(scorer_for(kind));
  if (!scorer) {
    std::fprintf(stderr, "rlx sft: no scorer for %s tasks here: %s\n", kind.c_str(), scorer.error().message.c_str());
    return 2;
  }
  std::optional<Sandbox> sandbox;
  if (workspace) {
    auto s = Sandbox::open();
    if (!s) {
      std::fprintf(stderr, "rlx sft: the expert's tools need the sandbox: %s\n", s.error().message.c_str());
      return 2;
    }
    sandbox.emplace(std::move(*s));
  }
  if (auto d = check_device(a.device); !d) {
    std::fprintf(stderr, "rlx sft: %s\n", d.error().message.c_str());
    return 2;
  }
  configure_compute_threads(a.threads);
  TokenTrainerOptions o;
  if (config) {
    auto model = policy_transformer_options(config->policy, (*tokenizer)->vocab());
    if (!model) {
      std::fprintf(stderr, "rlx sft: %s\n", model.error().message.c_str());
      return 2;
    }
    o.model = *model;
  }
  o.tokenizer = config ? config->tokens.tokenizer : std::string();
  if (config) o.rule = decoding_rule(config->tokens);
  o.lr = a.lr;
  o.seed = a.seed;
  o.device = a.device;
  o.unfilled = config && !hf_init_dir(config->policy.init).empty();  // loaded just below
  TokenTrainer trainer(o);
  if (config && !config->policy.init.empty()) {
    // Continued supervised training from the weights the RL run starts
    // from: RL's fair baseline (docs/workspace.md "Supervised start").
    auto from = trainer.load_model_file(config->policy.init);
    if (!from) {
      std::fprintf(stderr, "rlx sft: [policy] init: %s\n", from.error().message.c_str());
      return 2;
    }
    std::printf("starting from %s (%s)\n", from->c_str(),
                a.init.empty() || !adapters.empty() ? "[policy] init" : "--init");
  }
  if (!adapters.empty()) {
    auto from = trainer.load_model_file(adapters);
    if (!from) {
      std::fprintf(stderr, "rlx sft: --init: %s\n", from.error().message.c_str());
      return 2;
    }
    std::printf("adapters and heads from %s, over the base %s\n", from->c_str(), config->policy.init.c_str());
  }
  TokenEvalOptions eo;
  eo.kind = kind;
  eo.tasks = a.eval_tasks;
  if (config) {
    eo.max_new_tokens = config->tokens.max_new_tokens;
    eo.agent = config->tokens;
  }
  std::optional<ExpertRows> expert;
  if (workspace && a.eval_tasks > 0) {
    std::printf("playing the expert on the %d + %d evaluation tasks (to score its transcripts teacher-forced)\n",
                a.eval_tasks, a.eval_tasks);
    std::fflush(stdout);
    auto rows = expert_rows(*sandbox, config->tokens, **tokenizer, a.eval_tasks);
    if (!rows) {
      std::fprintf(stderr, "rlx sft: %s\n", rows.error().message.c_str());
      return 2;
    }
    expert = std::move(*rows);
  }
  auto evaluate = [&] {
    auto model = as_decoded(trainer);
    return evaluate_tokens(model, **scorer, eo);
  };
  report("before training,", 0, 0.0, evaluate());
  // Scored at the start and the end only: outside the --seconds a run trains.
  if (expert) report_expert_rows(trainer, *expert);
  if (a.steps == 0) {
    std::printf("--steps 0: the start evaluated; nothing trained or written\n");
    return 0;
  }

  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
  const auto start = std::chrono::steady_clock::now();
  std::int64_t tokens = 0;
  double loss = 0;
  int skipped = 0;
  int last = a.steps;  // the last step taken: --steps, or the one that ran past --seconds
  for (int step = 1; step <= last; ++step) {
    std::vector<std::vector<std::int64_t>> prompts, completions;
    std::vector<std::vector<std::uint8_t>> observed;
    if (workspace) {
      auto t = transcripts(*sandbox, config->tokens, **tokenizer, a.batch, a.drills, a.recoveries, rng);
      if (!t) {
        std::fprintf(stderr, "rlx sft: %s\n", t.error().message.c_str());
        return 2;
      }
      prompts = std::move(t->prompts);
      completions = std::move(t->completions);
      observed = std::move(t->observed);
      skipped += t->skipped;
    }
    for (int i = 0; !workspace && i < a.batch; ++i) {
      auto t = make_token_task(kind, draw(rng));
      // Every other prompt holds a hint (what hint distillation's teacher reads).
      const auto prompt = (*tokenizer)->encode(t->prompt);
      prompts.push_back(i % 2 ? hinted_prompt(prompt, t->hint, **tokenizer) : prompt);
      completions.push_back((*tokenizer)->encode(t->reference));
    }
    auto s = trainer.sft_step(prompts, completions, observed);
    tokens += s.tokens;
    loss = s.policy_loss;
    if (a.seconds > 0 && since(start) >= a.seconds) last = step;
    if (step == 1 || step % 20 == 0 || step == last) {  // the first step at once: a newcomer sees it run
      // The pace so far includes the evaluations, as what remains will.
      std::printf("step %d/%d  loss %.4f per token  %.0f tokens/s  %s%s%s\n", step, a.steps, loss,
                  static_cast<double>(tokens) / since(start), human_duration(since(start)).c_str(),
                  step < last ? (", " + left_text(step, a.steps, since(start), a.seconds)).c_str() : "",
                  skipped ? (", " + std::to_string(skipped) + " transcripts over the budget skipped").c_str() : "");
      std::fflush(stdout);
    }
    if (a.eval_every > 0 && step % a.eval_every == 0 && step != last) {
      // The checkpoint so far goes with each evaluation: a run stopped
      // early keeps the progress it reported.
      if (!save(trainer, a.out, config ? config->tokens.tokenizer : std::string())) return 2;
      const double at = since(start);
      report("at", step, at, evaluate());
    }
  }
  if (last < a.steps) std::printf("stopped at step %d: --seconds %g reached\n", last, a.seconds);
  report("after training,", last, since(start), evaluate());
  if (expert) report_expert_rows(trainer, *expert);
  if (!save(trainer, a.out, config ? config->tokens.tokenizer : std::string())) return 2;
  std::printf("weights written to %s\n", a.out.c_str());
  return 0;
}

}  // namespace rlx
