#include "explorers/token_eval.hpp"

#include <algorithm>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/workspace_scorer.hpp"
#include "envs/workspace/workspace_task.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/token_rollout.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/token_sampler.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

namespace {

// Agent episodes on `tasks`, greedy, scored by `scorer`: per task its
// score (nullopt: the machinery failed, asked 3 times) and its episode.
struct Played {
  std::optional<double> score;
  EpisodeStats stats;
  bool rewrote = false;  // a hole's body is no longer the raise
  std::string outcome = "not scored";  // TokenEvaluation::outcomes
  std::string family, sample;
  std::string transcript;  // the sample's line, then the turns and observations
};

std::vector<Played> play_workspace(MoETransformer& model, const Scorer& scorer, const TokenEvalOptions& o,
                                   const Sandbox& sandbox, const std::vector<WorkspaceTask>& tasks) {
  std::vector<Played> out;
  std::mt19937_64 rng(0);  // unused by greedy decoding
  // A task whose prompt and budget do not fit the model is not played: unscored, said in its sample.
  std::vector<WorkspaceTask> fitting;
  const auto agent = agent_options(o.agent, true);
  for (const auto& t : tasks) {
    const auto prompt = static_cast<std::int64_t>(AgentBatch::prompt_tokens(t, *agent.tokenizer).size());
    if (prompt + o.agent.max_new_tokens <= model->options().max_len) {
      fitting.push_back(t);
      continue;
    }
    Played p;
    p.family = task_family(t);
    p.outcome = "not played";
    p.sample = t.id + " -> not played: its prompt (" + std::to_string(prompt) +
               " tokens) and max_new_tokens do not fit policy.max_len";
    out.push_back(std::move(p));
  }
  for (std::size_t first = 0; first < fitting.size(); first += static_cast<std::size_t>(o.batch)) {
    const auto n = std::min(fitting.size() - first, static_cast<std::size_t>(o.batch));
    AgentBatch batch(model, {fitting.begin() + static_cast<std::ptrdiff_t>(first),
                             fitting.begin() + static_cast<std::ptrdiff_t>(first + n)},
                     agent, sandbox);
    while (!batch.step(rng, 0)) {
    }
    batch.finish();
    for (const auto& e : batch.episodes()) {
      Played p;
      p.stats = e.stats();
      p.rewrote = e.holes_rewritten() > 0;
      p.family = task_family(e.task());
      p.sample = e.task().id + " -> " + to_string(e.end()) + " after " + std::to_string(e.stats().turns) + " turns";
      if (e.failure() == InfraFailure::none) {
        RewardRequestData req{first + out.size(), 0, e.task().id, e.payload()};
        auto r = scorer.score(req);
        for (int again = 0; again < 2 && retryable(r.failure); ++again) r = scorer.score(req);
        if (r.ok) p.score = r.score;
        if (r.ok) p.outcome = !p.rewrote && r.score < 1.0 ? "not rewritten" : score_outcome(r.score, r.reason);
        p.sample += " (" + r.reason + ")";
      }
      p.transcript = p.sample + "\n" + e.transcript();
      out.push_back(std::move(p));
    }
  }
  return out;
}

TokenEvaluation evaluate_workspace(MoETransformer& model, const Scorer& scorer, const TokenEvalOptions& o) {
  TokenEvaluation ev;
  auto sandbox = Sandbox::open();
  if (!sandbox) {
    ev.tasks = ev.unscored = o.tasks;
    ev.samples.push_back("the sandbox: " + sandbox.error().message);
    return ev;
  }
  const auto [held, fresh] = workspace_eval_tasks(o.tasks, static_cast<int>(o.agent.difficulty));
  int episodes = 0;
  auto tally = [&](const std::vector<Played>& played, double& pass, double& mean, int& tasks, double& found,
                   double& rewrote, std::map<std::string, int>& outcomes) {
    int scored = 0;
    for (const auto& p : played) {
      ++outcomes[p.outcome];
      found += p.stats.hole_file_calls > 0 ? 1.0 / static_cast<double>(played.size()) : 0.0;
      rewrote += p.rewrote ? 1.0 / static_cast<double>(played.size()) : 0.0;
    }
    for (const auto& p : played) {
      if (&p == &played.front()) ev.episodes.push_back(p.transcript.empty() ? p.sample : p.transcript);
      ++tasks;
      ++episodes;
      ev.mean_turns += p.stats.turns;
      ev.mean_tool_calls += p.stats.tool_calls;
      ev.mean_bad_calls += p.stats.bad_calls;
      if (ev.samples.size() < 3) ev.samples.push_back(p.sample);
      if (!p.score) {
        ++ev.unscored;
        continue;
      }
      ++scored;
      const bool passed = *p.score >= 1.0;
      pass += passed;
      mean += *p.score;
      auto& fam = ev.by_family[p.family];
      fam.first += passed;
      ++fam.second;
    }
    if (scored > 0) {
      pass /= scored;
      mean /= scored;
    }
    return scored;
  };
  tally(play_workspace(model, scorer, o, *sandbox, held), ev.pass_at_1, ev.mean_score, ev.tasks, ev.found_hole,
        ev.rewrote_hole, ev.outcomes);
  tally(play_workspace(model, scorer, o, *sandbox, fresh), ev.train_pass_at_1, ev.train_mean_score, ev.train_tasks,
        ev.train_found_hole, ev.train_rewrote_hole, ev.train_outcomes);
  if (episodes > 0) {
    ev.mean_turns /= episodes;
    ev.mean_tool_calls /= episodes;
    ev.mean_bad_calls /= episodes;
  }
  return ev;
}

}  // namespace

WorkspaceEvalTasks workspace_eval_tasks(int n, int difficulty) {
  WorkspaceEvalTasks t;
  for (int i = 0; i < n; ++i) {
    t.held_out.push_back(make_workspace_task(TaskSplit::held_out, static_cast<std::uint64_t>(i), difficulty));
    // Training draws seeds below heldout_seed(): these are fresh.
    t.fresh.push_back(make_workspace_task(TaskSplit::train, heldout_seed() + static_cast<std::uint64_t>(i), difficulty));
  }
  return t;
}

TokenEvaluation evaluate_tokens(MoETransformer& model, const Scorer& scorer, const TokenEvalOptions& o) {
  if (o.kind == "workspace") return evaluate_workspace(model, scorer, o);
  TokenEvaluation ev;
  SampleOptions s;
  s.greedy = true;
  s.max_new_tokens = o.max_new_tokens;
  const auto tokenizer = run_tokenizer(o.agent.tokenizer);
  s.eos = tokenizer->eos();
  s.pad = tokenizer->pad();
  std::mt19937_64 rng(0);  // unused by greedy decoding
  for (int first = 0; first < o.tasks; first += static_cast<int>(o.batch)) {
    const int n = std::min<int>(static_cast<int>(o.batch), o.tasks - first);
    std::vector<TokenTask> tasks;
    std::vector<std::vector<std::int64_t>> prompts;
    for (int i = 0; i < n; ++i) {
      auto t = make_token_task(o.kind, heldout_seed() + static_cast<std::uint64_t>(first + i));
      if (!t) continue;
      prompts.push_back(tokenizer->encode(t->prompt));
      tasks.push_back(std::move(*t));
    }
    if (tasks.empty()) break;
    auto g = generate(model, prompts, s, rng);
    for (std::size_t b = 0; b < tasks.size(); ++b) {
      const std::string text = tokenizer->decode(completion(g, static_cast<std::int64_t>(b)));
      RewardRequestData req;
      req.request_id = static_cast<std::uint64_t>(first) + b;
      req.task = tasks[b].id;
      req.payload = text;
      // A failure of the machinery is asked again, then left out: it is
      // neither a pass nor a fail of the policy.
      auto r = scorer.score(req);
      for (int again = 0; again < 2 && retryable(r.failure); ++again) r = scorer.score(req);
      ++ev.tasks;
      if (ev.samples.size() < 3) ev.samples.push_back(tasks[b].id + " -> " + text + " (" + r.reason + ")");
      if (!r.ok) {
        ++ev.unscored;
        continue;
      }
      const double score = r.score;
      ev.mean_score += score;
      ev.pass_at_1 += score >= 1.0 ? 1.0 : 0.0;
      const auto colon = tasks[b].id.find(':');  // code ids are FAMILY:SEED; other kinds have one family
      auto& fam = ev.by_family[colon == std::string::npos ? o.kind : tasks[b].id.substr(0, colon)];
      fam.first += score >= 1.0 ? 1 : 0;
      ++fam.second;
    }
  }
  if (const int scored = ev.tasks - ev.unscored; scored > 0) {
    ev.pass_at_1 /= scored;
    ev.mean_score /= scored;
  }
  return ev;
}

std::string family_summary(const TokenEvaluation& ev) {
  std::string out;
  for (const auto& [family, counts] : ev.by_family)
    out += (out.empty() ? "" : ", ") + family + " " + std::to_string(counts.first) + "/" + std::to_string(counts.second);
  return out;
}

std::string outcome_summary(const std::map<std::string, int>& outcomes) {
  std::vector<std::pair<std::string, int>> sorted(outcomes.begin(), outcomes.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [outcome, n] : sorted) out += (out.empty() ? "" : ", ") + outcome + " " + std::to_string(n);
  return out;
}

HeldOutEvaluator::HeldOutEvaluator(const PolicyConfig& policy, const TokenEvalOptions& options,
                                   std::shared_ptr<const Scorer> scorer)
    // Filled by each weight set it evaluates (evaluate()).
    : model_(make_unfilled_transformer(
          run_transformer_options(policy, run_tokenizer(options.agent.tokenizer)->vocab()), 0)),
      options_(options),
      scorer_(std::move(scorer)) {}

Result<TokenEvaluation> HeldOutEvaluator::evaluate(const WeightSetData& weights) {
  if (auto ok = view_weights(*model_, weights); !ok) return ok.error();
  auto scored = evaluate_tokens(model_, *scorer_, options_);
  release_weights(*model_);  // hold no version between evaluations: the store may let it go
  return scored;
}

}  // namespace rlx
