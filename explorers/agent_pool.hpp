// Agent episodes with continuous batching: B rows of one ContinuousDecoder
// (policy/continuous_decoder.hpp), each row one workspace episode at a
// time. A row samples its turn, runs the tool call between two steps and
// takes the observation as context, as in AgentBatch (agent_batch.hpp);
// when its episode ends the row takes the next task at once instead of
// idling until the batch's slowest episode is over. Finished episodes come
// out with their token sequences, in the order they finished. Weights may
// change between any two steps: every sampled token carries its own
// version. CAF-free.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "explorers/agent_batch.hpp"
#include "policy/continuous_decoder.hpp"

namespace rlx {

class AgentPool {
 public:
  // The next task for a row that is free; nullopt: none (yet). REQUIRES of
  // every task: its prompt and max_new_tokens fit the model's max_len.
  using NextTask = std::function<std::optional<WorkspaceTask>()>;
  AgentPool(MoETransformer& model, std::int64_t rows, const AgentOptions& options, const Sandbox& sandbox,
            NextTask next, std::int64_t chunk = 8);

  // Gives free rows their next tasks, decodes one step, then runs the tool
  // calls it completed. False when no row had an episode (nothing to do).
  bool step(std::mt19937_64& rng, std::uint64_t version);

  // sequence.id is the episode's start index: 0 for the first task
  // NextTask gave, 1 for the next, and so on.
  struct Finished {
    WorkspaceEpisode episode;
    Sequence sequence;
  };
  // The episodes finished since the last call.
  std::vector<Finished> take_finished();
  // Episodes started and not finished yet.
  std::int64_t running() const { return running_; }

  const ContinuousDecoder& decoder() const { return decoder_; }
  // A scripted agent (tests): `row` is at the start of a turn (its
  // observation may still be queued) and no turn is scripted; its next
  // turn will be `text`, placed as the policy's tokens.
  bool at_turn_start(std::int64_t row) const;
  void script_turn(std::int64_t row, const std::string& text);
  // The episode in `row` (REQUIRES: one is).
  const WorkspaceEpisode& episode(std::int64_t row) const;

  // Rows the decoder stepped, and rows that held an episode at a step:
  // utilisation = busy / stepped. Policy tokens sampled; seconds in tools.
  std::int64_t rows_stepped() const { return rows_stepped_; }
  std::int64_t rows_busy() const { return rows_busy_; }
  std::int64_t sampled_tokens() const { return sampled_tokens_; }
  double tool_seconds() const { return tool_seconds_; }
  // Turns ended: each a tool call run, or one that could not run.
  std::int64_t turns_ended() const { return turns_ended_; }

 private:
  struct Row {
    std::optional<WorkspaceEpisode> episode;
    std::string turn;
    std::int64_t turn_len = 0;
    bool turn_ended = false;
    bool scripted = false;  // the turn is queued as steered tokens
  };
  void fill();
  void end_turn(std::int64_t row);
  void end_episode(std::int64_t row);

  AgentOptions options_;
  const Sandbox* sandbox_;
  NextTask next_;
  std::int64_t max_len_;
  ContinuousDecoder decoder_;
  std::vector<Row> rows_;
  std::map<std::uint64_t, WorkspaceEpisode> ending_;  // ended, their last token not fed yet
  std::vector<Finished> finished_;
  std::uint64_t next_id_ = 0;
  std::int64_t running_ = 0;
  std::int64_t rows_stepped_ = 0, rows_busy_ = 0, sampled_tokens_ = 0, turns_ended_ = 0;
  double tool_seconds_ = 0;
};

}  // namespace rlx
