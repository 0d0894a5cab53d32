#include "explorers/agent_batch.hpp"

#include <chrono>

#include "core/error.hpp"

namespace rlx {

namespace {

std::vector<WorkspaceEpisode> episodes_for(std::vector<WorkspaceTask> tasks, const AgentOptions& o) {
  std::vector<WorkspaceEpisode> out;
  out.reserve(tasks.size());
  for (auto& t : tasks) out.emplace_back(std::move(t), o.limits, o.tools);
  return out;
}

std::vector<std::vector<std::int64_t>> prompts_of(const std::vector<WorkspaceEpisode>& episodes, const Tokenizer& t) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& e : episodes) out.push_back(t.encode(e.prompt()));
  return out;
}

}  // namespace

SampleOptions agent_sampling(SampleOptions s, const Tokenizer& tokenizer) {
  s.end_at_eos = false;  // eos ends a turn's text, not the episode
  s.eos = tokenizer.eos();
  s.pad = tokenizer.pad();
  return s;
}

AgentBatch::AgentBatch(MoETransformer& model, std::vector<WorkspaceTask> tasks, const AgentOptions& options,
                       const Sandbox& sandbox)
    : options_(options),
      sandbox_(&sandbox),
      episodes_(episodes_for(std::move(tasks), options)),
      decoder_(model, prompts_of(episodes_, *options.tokenizer), agent_sampling(options.sample, *options.tokenizer)),
      turn_(episodes_.size()),
      turn_len_(episodes_.size(), 0),
      turn_ended_(episodes_.size(), false) {
  RLX_REQUIRE(options.turn_tokens > 0 && options.tokenizer);
}

std::vector<std::int64_t> AgentBatch::prompt_tokens(const WorkspaceTask& task, const Tokenizer& tokenizer) {
  return tokenizer.encode(episode_prompt(task));
}

bool AgentBatch::at_turn_start(std::int64_t row) const {
  return decoder_.active(row) && !decoder_.queued(row) && turn_len_[static_cast<std::size_t>(row)] == 0;
}

void AgentBatch::script_turn(std::int64_t row, const std::string& text) {
  RLX_REQUIRE(at_turn_start(row), row);
  decoder_.steer(row, options_.tokenizer->encode(text));
}

bool AgentBatch::step(std::mt19937_64& rng, std::uint64_t version) {
  RLX_REQUIRE(!done());
  const auto B = decoder_.rows();
  for (std::int64_t b = 0; b < B; ++b) rows_busy_ += decoder_.active(b);
  rows_stepped_ += B;
  decoder_.step(rng, version);
  for (std::int64_t b = 0; b < B; ++b) {
    // A row taking an observation has no turn under way; the turn after it
    // starts with the row's next sampled token.
    if (!decoder_.active(b) || !decoder_.last_generated(b)) continue;
    const auto i = static_cast<std::size_t>(b);
    const auto token = decoder_.last_token(b);
    ++turn_len_[i];
    if (token == options_.tokenizer->eos()) turn_ended_[i] = true;
    else turn_[i] += options_.tokenizer->text(token);
    if (decoder_.queued(b)) continue;  // a scripted turn still being placed
    if (turn_ended_[i] || turn_len_[i] >= options_.turn_tokens || WorkspaceEpisode::turn_complete(turn_[i]))
      end_turn(b);
  }
  if (decoder_.done())
    for (auto& e : episodes_) e.out_of_budget();  // no room left: the episodes still running end here
  return decoder_.done();
}

void AgentBatch::end_turn(std::int64_t row) {
  const auto i = static_cast<std::size_t>(row);
  auto& episode = episodes_[i];
  const auto start = std::chrono::steady_clock::now();
  const TurnOutcome out = episode.take_turn(turn_[i], *sandbox_);
  tool_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  turn_[i].clear();
  turn_len_[i] = 0;
  turn_ended_[i] = false;
  if (out.done) return decoder_.end_row(row);
  const auto observation = options_.tokenizer->encode(out.observation);
  // The observation and at least one token of the next turn must fit.
  if (static_cast<std::int64_t>(observation.size()) >= decoder_.room()) {
    episode.out_of_budget();
    return decoder_.end_row(row);
  }
  decoder_.observe(row, observation);
}

Generation AgentBatch::finish() { return decoder_.finish(); }

}  // namespace rlx
