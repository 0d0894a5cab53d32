#include "explorers/token_rollout.hpp"

#include "core/clock.hpp"

#include <optional>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/token_eval.hpp"
#include "policy/token_sampler.hpp"
#include "policy/token_segment.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

struct TokenRollout::Impl {
  MoETransformer model{nullptr};
  std::mt19937_64 rng;
  std::optional<Decoder> decoder;  // single-turn tasks
  std::vector<TokenTask> tasks;    // [B]
  // Workspace episodes: the batch in hand and the sandbox its tools run in.
  std::optional<AgentBatch> agents;
  std::optional<Sandbox> sandbox;
  std::shared_ptr<const Tokenizer> tokenizer;
  const Decoder* decoding() const { return agents ? &agents->decoder() : decoder ? &*decoder : nullptr; }
};

TokenRollout::TokenRollout(const TokenRolloutOptions& o) : options_(o), impl_(std::make_unique<Impl>()) {
  RLX_REQUIRE(o.rows > 0 && o.rows % o.tokens.group_size == 0, o.rows, o.tokens.group_size);
  impl_->tokenizer = run_tokenizer(o.tokens.tokenizer);
  impl_->model = make_seeded_transformer(transformer_options(o.policy, impl_->tokenizer->vocab()),
                                         o.seed + 1000003ull * o.explorer_id);
  impl_->rng.seed(o.seed * 6364136223846793005ull + o.explorer_id + 1);
}

AgentOptions agent_options(const TokensConfig& tokens, bool greedy) {
  AgentOptions a;
  a.sample.max_new_tokens = tokens.max_new_tokens;
  a.sample.temperature = tokens.temperature;
  a.sample.top_p = tokens.top_p;
  a.sample.greedy = greedy;
  a.turn_tokens = tokens.turn_tokens;
  a.limits.max_turns = static_cast<int>(tokens.max_turns);
  a.tokenizer = run_tokenizer(tokens.tokenizer);
  return a;
}

TokenRollout::~TokenRollout() = default;

Result<void> TokenRollout::load_weights(const WeightSetData& w) {
  auto ok = import_weights(*impl_->model, w);
  if (ok) version_ = w.version;
  return ok;
}

std::uint64_t TokenRollout::steps_in_segment() const {
  const Decoder* d = impl_->decoding();
  return d ? static_cast<std::uint64_t>(d->steps()) : 0;
}

std::uint64_t TokenRollout::newest_in_segment() const {
  const Decoder* d = impl_->decoding();
  return d ? d->newest_version() : 0;
}

std::uint64_t TokenRollout::drop_segment() {
  impl_->decoder.reset();
  impl_->agents.reset();
  return sequence_++;
}

Result<bool> TokenRollout::agent_step() {
  auto& im = *impl_;
  if (!im.agents) {
    if (!im.sandbox) {
      auto sandbox = Sandbox::open();
      if (!sandbox) return make_error(sandbox.error().code, "workspace tools need the sandbox: " + sandbox.error().message);
      im.sandbox.emplace(std::move(*sandbox));
    }
    // Training tasks only: held-out tasks come from templates this never draws.
    const auto groups = options_.rows / options_.tokens.group_size;
    std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);  // the evaluator's fresh ones lie above
    std::vector<WorkspaceTask> tasks;
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      auto task = make_workspace_task(TaskSplit::train, draw(im.rng), static_cast<int>(options_.tokens.difficulty));
      const auto prompt = AgentBatch::prompt_tokens(task, *im.tokenizer);
      if (static_cast<std::int64_t>(prompt.size()) + options_.tokens.max_new_tokens > options_.policy.max_len)
        return make_error(Errc::config_range, "task " + task.id + ": its prompt (" + std::to_string(prompt.size()) +
                                                  " tokens) and max_new_tokens do not fit policy.max_len");
      for (std::int64_t j = 0; j < options_.tokens.group_size; ++j) tasks.push_back(task);
    }
    im.agents.emplace(im.model, std::move(tasks), agent_options(options_.tokens, false), *im.sandbox);
  }
  return im.agents->step(im.rng, version_);
}

Result<bool> TokenRollout::step() {
  auto& im = *impl_;
  deferred_.clear();
  if (options_.kind == "workspace") return agent_step();
  if (!im.decoder) {
    // A new batch: rows/group tasks, each shown group_size times. Task
    // seeds follow from the rng (so from the run seed and explorer id),
    // below the held-out range the evaluator uses.
    const auto groups = options_.rows / options_.tokens.group_size;
    std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
    im.tasks.clear();
    std::vector<std::vector<std::int64_t>> prompts;
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      auto task = make_token_task(options_.kind, draw(im.rng));
      if (!task) return task.error();
      const auto ids = im.tokenizer->encode(task->prompt);
      if (static_cast<std::int64_t>(ids.size()) + options_.tokens.max_new_tokens > options_.policy.max_len)
        return make_error(Errc::config_range, "task " + task->id + ": its prompt (" + std::to_string(ids.size()) +
                                                  " tokens) and max_new_tokens do not fit policy.max_len");
      for (std::int64_t j = 0; j < options_.tokens.group_size; ++j) {
        prompts.push_back(ids);
        im.tasks.push_back(*task);
      }
    }
    SampleOptions s;
    s.max_new_tokens = options_.tokens.max_new_tokens;
    s.temperature = options_.tokens.temperature;
    s.top_p = options_.tokens.top_p;
    s.eos = Tokenizer::eos;
    s.pad = Tokenizer::pad;
    im.decoder.emplace(im.model, prompts, s);
  }
  return im.decoder->step(im.rng, version_);
}

Segment TokenRollout::take_segment() {
  auto& im = *impl_;
  RLX_REQUIRE(im.decoding() && im.decoding()->done());
  // What each row hands its scorer: a single-turn row its completion, an
  // agent row its episode's changed files (a row whose episode the
  // machinery failed is not scored at all).
  Generation g;
  std::vector<std::string> ids, completions;
  std::vector<InfraFailure> machinery;
  if (im.agents) {
    g = im.agents->finish();
    for (const auto& e : im.agents->episodes()) {
      ids.push_back(e.task().id);
      completions.push_back(e.payload());
      machinery.push_back(e.failure());
    }
    im.agents.reset();
  } else {
    g = im.decoder->finish();
    im.decoder.reset();
    for (std::size_t b = 0; b < im.tasks.size(); ++b) {
      ids.push_back(im.tasks[b].id);
      completions.push_back(im.tokenizer->decode(completion(g, static_cast<std::int64_t>(b))));
    }
    machinery.assign(ids.size(), InfraFailure::none);
  }
  const auto B = static_cast<std::int64_t>(ids.size());
  std::vector<float> rewards(B, 0.0f);
  std::vector<std::string> hints;
  std::vector<std::optional<RewardResultData>> results(B);  // in_process: each row's outcome
  std::vector<InfraFailure> retried;  // failures met by rows scored again
  for (std::int64_t b = 0; b < B; ++b) {
    if (machinery[b] != InfraFailure::none || !options_.in_process) continue;
    RewardRequestData req{static_cast<std::uint64_t>(b), options_.explorer_id, ids[b], completions[b]};
    auto& r = results[b];
    r = options_.in_process->score(req);
    for (int again = 0; again < options_.reward_retries && retryable(r->failure); ++again) {
      retried.push_back(r->failure);
      r = options_.in_process->score(req);
    }
    if (r->ok) rewards[b] = r->score;
    if (r->ok && !r->hint.empty()) hints.resize(B), hints[b] = r->hint;
  }
  const std::uint64_t seq = sequence_++;
  Segment s = token_segment(g, rewards, ids, static_cast<std::uint32_t>(options_.tokens.group_size),
                            options_.explorer_id, seq);
  s.tokens->hints = std::move(hints);
  s.created_unix_ns = unix_now_ns();
  // A row without an outcome (its episode's sandbox failed, or its scorer
  // could not judge it) is masked and counted, never scored 0.
  for (const auto why : retried) s.count_failure(why);
  s.reward_retries = static_cast<std::uint32_t>(retried.size());
  for (std::int64_t b = 0; b < B; ++b) {
    if (machinery[b] != InfraFailure::none)
      s.mask_episode(0, s.num_steps - 1, static_cast<std::uint32_t>(b), machinery[b]);
    else if (results[b] && !results[b]->ok)
      s.mask_episode(0, s.num_steps - 1, static_cast<std::uint32_t>(b), results[b]->failure);
  }
  if (!options_.in_process)
    for (std::int64_t b = 0; b < B; ++b)
      if (machinery[b] == InfraFailure::none)
        deferred_.push_back({seq, static_cast<std::uint32_t>(g.prompt_width + g.lengths[b] - 1),
                             static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b),
                             ids[b] + "\n" + completions[b]});
  return s;
}

}  // namespace rlx
