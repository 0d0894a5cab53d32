#include "explorers/agent_pool.hpp"

#include <chrono>
#include <utility>

#include "core/error.hpp"

namespace rlx {

AgentPool::AgentPool(MoETransformer& model, std::int64_t rows, const AgentOptions& options, const Sandbox& sandbox,
                     NextTask next, std::int64_t chunk)
    : options_(options),
      sandbox_(&sandbox),
      next_(std::move(next)),
      max_len_(model->options().max_len),
      decoder_(model, rows, agent_sampling(options.sample, *options.tokenizer), chunk),
      rows_(static_cast<std::size_t>(rows)) {
  RLX_REQUIRE(options.turn_tokens > 0 && options.tokenizer && next_);
}

void AgentPool::fill() {
  for (std::int64_t r = 0; r < decoder_.rows(); ++r) {
    if (!decoder_.idle(r)) continue;
    auto task = next_();
    if (!task) return;
    auto& row = rows_[static_cast<std::size_t>(r)];
    row = Row{};
    row.episode.emplace(std::move(*task), options_.limits, options_.tools);
    const auto prompt = options_.tokenizer->encode(row.episode->prompt());
    RLX_REQUIRE(static_cast<std::int64_t>(prompt.size()) + options_.sample.max_new_tokens <= max_len_,
                row.episode->task().id, prompt.size());
    decoder_.start(r, prompt, next_id_++);
    ++running_;
  }
}

bool AgentPool::step(std::mt19937_64& rng, std::uint64_t version) {
  fill();
  if (!decoder_.busy()) return false;
  for (std::int64_t r = 0; r < decoder_.rows(); ++r) rows_busy_ += !decoder_.idle(r);
  rows_stepped_ += decoder_.rows();
  decoder_.step(rng, version);
  for (std::int64_t b = 0; b < decoder_.rows(); ++b) {
    if (!decoder_.sampled(b)) continue;
    auto& row = rows_[static_cast<std::size_t>(b)];
    ++sampled_tokens_;
    const auto token = decoder_.last_token(b);
    ++row.turn_len;
    if (token == options_.tokenizer->eos()) row.turn_ended = true;
    else row.turn += options_.tokenizer->text(token);
    if (decoder_.queued(b)) continue;  // a scripted turn still being placed
    if (row.turn_ended || row.turn_len >= options_.turn_tokens || WorkspaceEpisode::turn_complete(row.turn))
      end_turn(b);
    else if (decoder_.room(b) == 0)  // no room for the rest of the turn
      end_episode(b);
  }
  for (auto& s : decoder_.take_finished()) {
    auto it = ending_.find(s.id);
    RLX_REQUIRE(it != ending_.end(), s.id);
    finished_.push_back(Finished{std::move(it->second), std::move(s)});
    ending_.erase(it);
    --running_;
  }
  return true;
}

void AgentPool::end_turn(std::int64_t row) {
  auto& r = rows_[static_cast<std::size_t>(row)];
  const auto start = std::chrono::steady_clock::now();
  const TurnOutcome out = r.episode->take_turn(r.turn, *sandbox_);
  tool_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++turns_ended_;
  r.turn.clear();
  r.turn_len = 0;
  r.turn_ended = false;
  r.scripted = false;
  if (out.done) return end_episode(row);
  const auto observation = options_.tokenizer->encode(out.observation);
  // The observation and at least one token of the next turn must fit.
  if (static_cast<std::int64_t>(observation.size()) >= decoder_.room(row)) return end_episode(row);
  decoder_.observe(row, observation);
}

void AgentPool::end_episode(std::int64_t row) {
  auto& r = rows_[static_cast<std::size_t>(row)];
  r.episode->out_of_budget();  // no effect on an episode that ended by itself
  const auto id = decoder_.id(row);
  ending_.emplace(id, std::move(*r.episode));
  r = Row{};
  decoder_.end(row);  // its sequence finishes after its last token is fed (step() collects it)
}

std::vector<AgentPool::Finished> AgentPool::take_finished() { return std::exchange(finished_, {}); }

bool AgentPool::at_turn_start(std::int64_t row) const {
  const auto& r = rows_[static_cast<std::size_t>(row)];
  return !decoder_.idle(row) && r.episode && !r.scripted && r.turn_len == 0;
}

void AgentPool::script_turn(std::int64_t row, const std::string& text) {
  RLX_REQUIRE(at_turn_start(row), row);
  decoder_.steer(row, options_.tokenizer->encode(text));
  rows_[static_cast<std::size_t>(row)].scripted = true;
}

const WorkspaceEpisode& AgentPool::episode(std::int64_t row) const {
  const auto& r = rows_[static_cast<std::size_t>(row)];
  RLX_REQUIRE(r.episode.has_value(), row);
  return *r.episode;
}

}  // namespace rlx
