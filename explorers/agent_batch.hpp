// Agent episodes decoded together: B workspace episodes (envs/workspace)
// through one Decoder (policy/token_sampler.hpp), turn by turn. Each step
// samples a token for every row; a row whose turn holds a complete tool
// call (or ends its text, or reaches turn_tokens) runs the call on its
// episode's private workspace copy right there, between two steps, and
// its observation is queued into the row: the next steps place it in the
// KV cache as context (valid, not generated), after which the row samples
// its next turn. Rows never wait on each other. A row ends when its
// episode does (submit, turn limit, a machinery failure) or when the
// episode's token budget (max_new_tokens) has no room left for the next
// observation. Weights may change between any two steps, within a turn or
// between turns: every sampled token carries the version of its step.
// CAF-free; the explorer's rollout and the evaluator both use it.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <memory>

#include "envs/code/sandbox.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "policy/token_sampler.hpp"

namespace rlx {

struct AgentOptions {
  SampleOptions sample;             // max_new_tokens: the episode's budget after the prompt
  std::int64_t turn_tokens = 200;   // a longer turn is cut (its call is then bad)
  EpisodeLimits limits;
  ToolBudget tools;
  std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::characters();
};

// How agent rows sample: eos ends a turn's text, not the episode (the
// caller ends rows); the tokenizer's eos and pad.
SampleOptions agent_sampling(SampleOptions s, const Tokenizer& tokenizer);

class AgentBatch {
 public:
  // REQUIRES: every task's prompt fits (prompt_tokens(task) + max_new_tokens <= the model's max_len).
  AgentBatch(MoETransformer& model, std::vector<WorkspaceTask> tasks, const AgentOptions& options,
             const Sandbox& sandbox);

  // The prompt's tokens of an episode on `task`.
  static std::vector<std::int64_t> prompt_tokens(const WorkspaceTask& task, const Tokenizer& tokenizer);

  // One decoding step, then the tool calls it completed. True when every
  // episode is over (then finish()).
  bool step(std::mt19937_64& rng, std::uint64_t version);
  bool done() const { return decoder_.done(); }
  Generation finish();

  const std::vector<WorkspaceEpisode>& episodes() const { return episodes_; }
  const Decoder& decoder() const { return decoder_; }
  // A scripted agent (tests): `row` is at the start of a turn and nothing is
  // queued; its next turn will be `text`, placed as the policy's tokens.
  bool at_turn_start(std::int64_t row) const;
  void script_turn(std::int64_t row, const std::string& text);
  // Rows the decoder stepped, and rows that were busy at a step (sampling,
  // or taking an observation): utilisation = busy / stepped.
  std::int64_t rows_stepped() const { return rows_stepped_; }
  std::int64_t rows_busy() const { return rows_busy_; }
  double tool_seconds() const { return tool_seconds_; }

 private:
  void end_turn(std::int64_t row);
  AgentOptions options_;
  const Sandbox* sandbox_;
  std::vector<WorkspaceEpisode> episodes_;
  Decoder decoder_;
  std::vector<std::string> turn_;     // [B] the current turn's text
  std::vector<std::int64_t> turn_len_;  // [B] its tokens
  std::vector<bool> turn_ended_;      // [B] the policy ended its text (eos)
  std::int64_t rows_stepped_ = 0, rows_busy_ = 0;
  double tool_seconds_ = 0;
};

}  // namespace rlx
