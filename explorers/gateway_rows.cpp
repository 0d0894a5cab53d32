#include "explorers/gateway_rows.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace rlx {

namespace {

SampleOptions gateway_sampling(SampleOptions s, const Tokenizer& tokenizer) {
  s.max_new_tokens = 1;  // each turn gives its own budget (start's max_new)
  s.end_at_eos = false;  // the rows end turns themselves
  s.eos = tokenizer.eos();
  s.pad = tokenizer.pad();
  return s;
}

}  // namespace

GatewayRows::GatewayRows(MoETransformer& model, std::int64_t rows, SampleOptions sample,
                         std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<GatewayHub> hub, std::int64_t chunk)
    : model_(&model),
      sample_(gateway_sampling(sample, *tokenizer)),
      tokenizer_(std::move(tokenizer)),
      hub_(std::move(hub)),
      chunk_(chunk),
      decoder_(model, rows, sample_, chunk),
      rows_(static_cast<std::size_t>(rows)) {
  RLX_REQUIRE(tokenizer_ && hub_);
}

GatewayRows::~GatewayRows() {
  for (auto& r : rows_)
    if (r.turn) hub_->abandoned(r.turn, "the explorer serving it stopped");
  for (auto& [id, r] : ending_) hub_->abandoned(r.turn, "the explorer serving it stopped");
}

void GatewayRows::abandon_all(const std::string& why) {
  for (auto& r : rows_)
    if (r.turn) hub_->abandoned(r.turn, why);
  for (auto& [id, r] : ending_) hub_->abandoned(r.turn, why);
  rows_.assign(rows_.size(), Row{});
  ending_.clear();
  decoder_ = ContinuousDecoder(*model_, decoder_.rows(), sample_, chunk_);
}

std::int64_t GatewayRows::busy_rows() const {
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < decoder_.rows(); ++r) n += !decoder_.idle(r);
  return n;
}

void GatewayRows::fill(std::chrono::milliseconds wait) {
  std::vector<std::int64_t> free;
  for (std::int64_t r = 0; r < decoder_.rows(); ++r)
    if (decoder_.idle(r)) free.push_back(r);
  if (free.empty()) return;
  const auto max_len = (*model_)->options().max_len, vocab = (*model_)->options().vocab;
  auto turns = hub_->take_turns(free.size(), decoder_.busy() ? std::chrono::milliseconds(0) : wait);
  std::size_t next = 0;
  for (auto& turn : turns) {
    const auto& spec = turn->spec();
    const auto n = static_cast<std::int64_t>(spec.prompt.size());
    // The HTTP layer checks these; a turn that still breaks them fails, the row stays free.
    if (n == 0 || n >= max_len) {
      hub_->abandoned(turn, fmt::format("the prompt has {} tokens; the policy's context holds {}", n, max_len));
      continue;
    }
    if (std::any_of(spec.prompt.begin(), spec.prompt.end(), [&](std::int64_t t) { return t < 0 || t >= vocab; })) {
      hub_->abandoned(turn, fmt::format("a prompt token id is outside the vocabulary (0..{})", vocab - 1));
      continue;
    }
    const auto r = free[next++];
    auto& row = rows_[static_cast<std::size_t>(r)];
    row = Row{};
    row.turn = turn;
    decoder_.start(r, spec.prompt, next_id_++, std::clamp<std::int64_t>(spec.max_tokens, 1, max_len - n));
  }
}

// A token was sampled on `row`: the turn gets it; eos, a stop string or
// the turn's budget ends the row.
void GatewayRows::after_sample(std::int64_t row) {
  auto& r = rows_[static_cast<std::size_t>(row)];
  const auto token = decoder_.last_token(row);
  ++sampled_;
  if (token == tokenizer_->eos()) r.finish_reason = "stop";
  else r.text += tokenizer_->text(token);
  const auto piece = tokenizer_->text(token).size();
  for (const auto& stop : r.turn->spec().stop) {
    // Only a stop string that ends within this token's text can be new.
    const auto from = r.text.size() >= stop.size() + piece ? r.text.size() - stop.size() - piece : 0;
    const auto at = r.text.find(stop, from);
    if (at != std::string::npos) {
      r.cut = std::min(r.cut, at);
      r.finish_reason = "stop";
    }
  }
  if (r.finish_reason.empty() && decoder_.room(row) == 0) r.finish_reason = "length";
}

void GatewayRows::end_row(std::int64_t row) {
  auto& r = rows_[static_cast<std::size_t>(row)];
  ending_.emplace(decoder_.id(row), std::move(r));
  r = Row{};
  decoder_.end(row);  // its sequence finishes once its last token is fed (collect())
}

void GatewayRows::collect() {
  const auto width = static_cast<std::size_t>((*model_)->options().layers * (*model_)->options().top_k);
  for (auto& s : decoder_.take_finished()) {
    auto it = ending_.find(s.id);
    RLX_REQUIRE(it != ending_.end(), s.id);
    TokenTrace trace{std::move(s.tokens), std::move(s.generated), std::move(s.log_probs), std::move(s.versions),
                     std::move(s.routes), width};
    auto text = it->second.text.substr(0, it->second.cut);
    hub_->finished(it->second.turn, trace, it->second.finish_reason, std::move(text));
    ending_.erase(it);
  }
}

bool GatewayRows::step(std::mt19937_64& rng, std::uint64_t version, std::chrono::milliseconds wait) {
  // Rows whose clients gave up end now.
  for (std::int64_t r = 0; r < decoder_.rows(); ++r) {
    auto& row = rows_[static_cast<std::size_t>(r)];
    if (!row.turn || !row.turn->cancelled()) continue;
    row.finish_reason = "cancelled";
    end_row(r);
  }
  fill(wait);
  if (!decoder_.busy()) {
    collect();
    return false;
  }
  rows_busy_ += busy_rows();
  rows_stepped_ += decoder_.rows();
  decoder_.step(rng, version);
  for (std::int64_t b = 0; b < decoder_.rows(); ++b) {
    if (!decoder_.sampled(b)) continue;
    after_sample(b);
    auto& row = rows_[static_cast<std::size_t>(b)];
    row.turn->append(decoder_.last_token(b), decoder_.last_log_prob(b), static_cast<std::int64_t>(version));
    if (!row.finish_reason.empty()) end_row(b);
  }
  collect();
  return true;
}

}  // namespace rlx
