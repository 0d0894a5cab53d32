// The gateway's decoding (issue 25; docs/gateway.md): B rows of one
// ContinuousDecoder serving the turns harnesses submit to a GatewayHub.
// Each step fills free rows with queued turns (so concurrent requests
// share a batch: continuous batching), decodes one step with the weights
// in use, hands each sampled token to its turn (id, log-probability,
// version: a streaming client sees it at once) and ends a row at eos, at a
// stop string, at its max_tokens or when its client gave up. A finished
// row goes back to the hub whole (prompt, completion, routes), where its
// session takes it. CAF-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "envs/tokens/tokenizer.hpp"
#include "gateway/gateway_hub.hpp"
#include "policy/continuous_decoder.hpp"

namespace rlx {

class GatewayRows {
 public:
  // `sample`: temperature and top_p of every row (the run's: the learner's
  // ratios assume the distribution the tokens were drawn from).
  GatewayRows(MoETransformer& model, std::int64_t rows, SampleOptions sample,
              std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<GatewayHub> hub, std::int64_t chunk = 64);
  ~GatewayRows();  // turns still on rows fail ("the explorer stopped")

  // Free rows take queued turns (waiting up to `wait` for one when no row is
  // busy), then one step. False: no row had work (nothing was decoded).
  bool step(std::mt19937_64& rng, std::uint64_t version, std::chrono::milliseconds wait);
  // Fails every turn on a row (their tokens were sampled with weights being dropped).
  void abandon_all(const std::string& why);

  std::int64_t rows() const { return decoder_.rows(); }
  std::int64_t busy_rows() const;
  // Rows stepped and rows busy at a step (utilisation), tokens sampled.
  std::int64_t rows_stepped() const { return rows_stepped_; }
  std::int64_t rows_busy() const { return rows_busy_; }
  std::int64_t sampled_tokens() const { return sampled_; }

 private:
  struct Row {
    std::shared_ptr<GatewayTurn> turn;
    std::string text;          // the completion's text so far
    std::string finish_reason;
    std::size_t cut = std::string::npos;  // where a stop string begins in `text`
  };
  void fill(std::chrono::milliseconds wait);
  void after_sample(std::int64_t row);
  void end_row(std::int64_t row);
  void collect();  // finished sequences back to the hub

  MoETransformer* model_;
  SampleOptions sample_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<GatewayHub> hub_;
  std::int64_t chunk_;
  ContinuousDecoder decoder_;
  std::vector<Row> rows_;
  std::map<std::uint64_t, Row> ending_;  // by sequence id: ended, last token not fed yet
  std::uint64_t next_id_ = 0;
  std::int64_t rows_stepped_ = 0, rows_busy_ = 0, sampled_ = 0;
};

}  // namespace rlx
