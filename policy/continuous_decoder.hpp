// Continuous batching: B rows decoded together through one KV cache, each
// row one sequence at a time. When a row's sequence ends, the row takes the
// next one (start()) while the others go on, so no row idles until the
// slowest sequence of a batch is done (the lockstep Decoder's way,
// policy/token_sampler.hpp). Episodes of very uneven lengths (agent
// sessions) keep every row busy.
//
// How rows come apart: a row's keys are its own. Starting a sequence marks
// every key of its row invalid and its positions count from 0 again;
// attention never sees another sequence's keys. Each step feeds each row
// the tokens it has placed but not yet fed, right-aligned in the step's
// columns: one sampled token, or up to `chunk` tokens of a prompt or an
// observation at once (a chunked prefill). The cache grows a column per
// step column; when it holds many more columns than the longest live row
// has keys, or is full, it is compacted (each row's keys moved together,
// in order). Positions come from each row's own count, never from columns.
//
// What a sequence records per token is what the learner needs, as in
// Generation: sampled or placed (observed) tokens, the behaviour
// log-probability and the version of each sampled token (per token: rows
// are not in lockstep), and the routes of every token fed. A sequence's
// last token is fed one step after end() (its routes), then the sequence
// is finished and its row idle. CAF-free.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "policy/moe_transformer.hpp"
#include "policy/token_sampler.hpp"

namespace rlx {

// One finished sequence: the prompt, then its completion.
struct Sequence {
  std::uint64_t id = 0;                 // the caller's
  std::int64_t prompt_length = 0;
  std::vector<std::int64_t> tokens;
  std::vector<std::uint8_t> generated;  // 1: the policy chose it (sampled or steered)
  std::vector<float> log_probs;         // behaviour log-probability of generated tokens, else 0
  std::vector<std::int64_t> versions;   // the version that sampled each generated token, else 0
  std::vector<std::int64_t> routes;     // [tokens, layers * k], token-major
  std::int64_t completion_length() const { return static_cast<std::int64_t>(tokens.size()) - prompt_length; }
};

// Finished sequences as rows for the learner: prompts left-padded to the
// widest, completions after them, padded after each row's end (every row
// ended).
Generation generation_of(const std::vector<Sequence>& sequences, std::int64_t layers, std::int64_t top_k,
                         std::int64_t pad);

class ContinuousDecoder {
 public:
  // options.max_new_tokens is each sequence's budget after its prompt;
  // end_at_eos is ignored (the caller ends sequences).
  ContinuousDecoder(MoETransformer& model, std::int64_t rows, const SampleOptions& options, std::int64_t chunk = 64);

  std::int64_t rows() const { return static_cast<std::int64_t>(rows_.size()); }
  // The row has no sequence: start() may give it one.
  bool idle(std::int64_t row) const;
  // Any row has a sequence (a step has work).
  bool busy() const;
  // REQUIRES: idle(row), a prompt, prompt + budget <= the model's max_len.
  // `max_new`: this sequence's budget after its prompt (0: options.max_new_tokens).
  void start(std::int64_t row, const std::vector<std::int64_t>& prompt, std::uint64_t id, std::int64_t max_new = 0);

  // One step with the model's current weights, labelled `version`.
  // REQUIRES: busy(); no running row at its frontier without room (the
  // caller ends a sequence whose room() is 0).
  void step(std::mt19937_64& rng, std::uint64_t version);
  // The id start() gave the row's sequence. REQUIRES: !idle(row).
  std::uint64_t id(std::int64_t row) const;
  // Whether the last step placed a token the policy chose in `row`, and which.
  bool sampled(std::int64_t row) const;
  std::int64_t last_token(std::int64_t row) const;
  // Its behaviour log-probability. REQUIRES: sampled(row).
  float last_log_prob(std::int64_t row) const;
  // Completion tokens the row's sequence may still take (placed ones count).
  std::int64_t room(std::int64_t row) const;
  // Whether the row has queued tokens not placed yet.
  bool queued(std::int64_t row) const;
  // An observation (context) or steered tokens (placed as the policy's,
  // one a step, with their log-probability under it), placed after what
  // the row holds and has queued. REQUIRES: a running row, tokens.size() <= room().
  void observe(std::int64_t row, const std::vector<std::int64_t>& tokens);
  void steer(std::int64_t row, const std::vector<std::int64_t>& tokens);
  // Ends the row's sequence (its queue is dropped).
  void end(std::int64_t row);
  // The sequences finished since the last call, in the order they finished.
  std::vector<Sequence> take_finished();

  std::int64_t steps() const { return steps_; }
  std::int64_t cache_length() const { return cache_.length; }
  std::int64_t compactions() const { return compactions_; }

 private:
  enum class State : std::uint8_t { idle, running, ending };
  struct Row {
    State state = State::idle;
    Sequence seq;
    std::size_t fed = 0;                // tokens of seq in the cache
    std::vector<std::int64_t> queue;    // tokens to place, in order
    std::vector<bool> steered;          // [queue]: placed as the policy's (one a step), else observed
    std::size_t next = 0;
    std::int64_t budget = 0;            // completion tokens the sequence may take
    bool sampled = false;               // the last step placed a policy token here
    std::unique_ptr<TokenRule::State> rule;  // with options.rule: the sequence's state
  };
  void enqueue(std::int64_t row, const std::vector<std::int64_t>& tokens, bool steered);
  void place(Row& row, std::int64_t token, bool generated, float log_prob, std::uint64_t version);
  void finish(std::size_t row);
  // After the step's feed: the row's next token is the policy's (sampled or steered).
  static bool takes_policy_token(const Row& r);

  MoETransformer* model_;
  SampleOptions o_;
  std::int64_t chunk_;
  std::int64_t layers_, top_k_;
  KVCache cache_;
  std::vector<Row> rows_;
  std::vector<Sequence> finished_;
  std::int64_t steps_ = 0, compactions_ = 0;
};

}  // namespace rlx
