#include "explorers/token_eval.hpp"

#include <algorithm>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "policy/token_sampler.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

TokenEvaluation evaluate_tokens(MoETransformer& model, const Scorer& scorer, const TokenEvalOptions& o) {
  TokenEvaluation ev;
  SampleOptions s;
  s.greedy = true;
  s.max_new_tokens = o.max_new_tokens;
  s.eos = Tokenizer::eos;
  s.pad = Tokenizer::pad;
  std::mt19937_64 rng(0);  // unused by greedy decoding
  for (int first = 0; first < o.tasks; first += static_cast<int>(o.batch)) {
    const int n = std::min<int>(static_cast<int>(o.batch), o.tasks - first);
    std::vector<TokenTask> tasks;
    std::vector<std::vector<std::int64_t>> prompts;
    for (int i = 0; i < n; ++i) {
      auto t = make_token_task(o.kind, heldout_seed() + static_cast<std::uint64_t>(first + i));
      if (!t) continue;
      prompts.push_back(Tokenizer::encode(t->prompt));
      tasks.push_back(std::move(*t));
    }
    if (tasks.empty()) break;
    auto g = generate(model, prompts, s, rng);
    for (std::size_t b = 0; b < tasks.size(); ++b) {
      const std::string text = Tokenizer::decode(completion(g, static_cast<std::int64_t>(b)));
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

HeldOutEvaluator::HeldOutEvaluator(const PolicyConfig& policy, const TokenEvalOptions& options,
                                   std::shared_ptr<const Scorer> scorer)
    : model_(make_seeded_transformer(transformer_options(policy, Tokenizer::vocab), 0)),
      options_(options),
      scorer_(std::move(scorer)) {}

Result<TokenEvaluation> HeldOutEvaluator::evaluate(const WeightSetData& weights) {
  if (auto ok = import_weights(*model_, weights); !ok) return ok.error();
  return evaluate_tokens(model_, *scorer_, options_);
}

}  // namespace rlx
