#include "policy/continuous_decoder.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"
#include "policy/rule_masks.hpp"

namespace rlx {

namespace {

// Columns the cache may hold beyond the longest live row before it is compacted.
constexpr std::int64_t kCompactSlack = 32;

}  // namespace

Generation generation_of(const std::vector<Sequence>& sequences, std::int64_t layers, std::int64_t top_k,
                         std::int64_t pad) {
  RLX_REQUIRE(!sequences.empty());
  std::int64_t P = 1, T = 0;
  for (const auto& s : sequences) {
    P = std::max(P, s.prompt_length);
    T = std::max(T, s.completion_length());
  }
  const auto B = static_cast<std::int64_t>(sequences.size()), W = P + T;
  auto i64 = torch::TensorOptions().dtype(torch::kLong);
  Generation g;
  g.prompt_width = P;
  g.tokens = torch::full({B, W}, pad, i64);
  g.valid = torch::zeros({B, W}, i64.dtype(torch::kBool));
  g.generated = torch::zeros({B, W}, i64.dtype(torch::kBool));
  g.log_probs = torch::zeros({B, W}, i64.dtype(torch::kFloat32));
  g.versions = torch::zeros({B, W}, i64);
  g.routes = torch::full({layers, B, W, top_k}, -1, i64);
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto val = g.valid.accessor<bool, 2>();
  auto gen = g.generated.accessor<bool, 2>();
  auto lps = g.log_probs.accessor<float, 2>();
  auto ver = g.versions.accessor<std::int64_t, 2>();
  auto rts = g.routes.accessor<std::int64_t, 4>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = sequences[static_cast<std::size_t>(b)];
    const auto n = static_cast<std::int64_t>(s.tokens.size());
    RLX_REQUIRE(static_cast<std::int64_t>(s.routes.size()) == n * layers * top_k, s.routes.size(), n);
    const auto first = P - s.prompt_length;  // the row's first column
    for (std::int64_t i = 0; i < n; ++i) {
      const auto c = first + i;
      const auto u = static_cast<std::size_t>(i);
      tok[b][c] = s.tokens[u];
      val[b][c] = true;
      gen[b][c] = s.generated[u] != 0;
      lps[b][c] = s.log_probs[u];
      ver[b][c] = s.versions[u];
      for (std::int64_t l = 0; l < layers; ++l)
        for (std::int64_t k = 0; k < top_k; ++k) rts[l][b][c][k] = s.routes[u * static_cast<std::size_t>(layers * top_k) + static_cast<std::size_t>(l * top_k + k)];
    }
    g.lengths.push_back(s.completion_length());
    g.ended.push_back(true);
  }
  return g;
}

ContinuousDecoder::ContinuousDecoder(MoETransformer& model, std::int64_t rows, const SampleOptions& options,
                                     std::int64_t chunk)
    : model_(&model),
      o_(options),
      chunk_(chunk),
      layers_(model->options().layers),
      top_k_(model->options().top_k),
      rows_(static_cast<std::size_t>(rows)) {
  RLX_REQUIRE(rows > 0 && chunk > 0 && options.max_new_tokens > 0, rows, chunk, options.max_new_tokens);
  RLX_REQUIRE(options.use_cache, "continuous batching decodes through the KV cache");
  // Compaction brings the cache down to the longest row (at most max_len
  // keys), and a step adds at most `chunk` columns.
  cache_ = model->new_cache(rows, model->options().max_len + chunk + kCompactSlack);
}

bool ContinuousDecoder::idle(std::int64_t row) const {
  RLX_REQUIRE(row >= 0 && row < rows(), row);
  return rows_[static_cast<std::size_t>(row)].state == State::idle;
}

bool ContinuousDecoder::busy() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.state != State::idle; });
}

void ContinuousDecoder::start(std::int64_t row, const std::vector<std::int64_t>& prompt, std::uint64_t id,
                              std::int64_t max_new) {
  RLX_REQUIRE(idle(row), row);
  const auto n = static_cast<std::int64_t>(prompt.size());
  const auto budget = max_new > 0 ? max_new : o_.max_new_tokens;
  RLX_REQUIRE(n > 0 && n + budget <= (*model_)->options().max_len, n, budget, (*model_)->options().max_len);
  auto& r = rows_[static_cast<std::size_t>(row)];
  r = Row{};
  r.state = State::running;
  r.budget = budget;
  r.seq.id = id;
  r.seq.prompt_length = n;
  if (o_.rule) r.rule = o_.rule->start();
  for (auto t : prompt) place(r, t, false, 0.0F, 0);
  reset_cache_row(cache_, row);
}

void ContinuousDecoder::place(Row& r, std::int64_t token, bool generated, float log_prob, std::uint64_t version) {
  r.seq.tokens.push_back(token);
  r.seq.generated.push_back(generated ? 1 : 0);
  r.seq.log_probs.push_back(log_prob);
  r.seq.versions.push_back(generated ? static_cast<std::int64_t>(version) : 0);
  if (r.rule) r.rule->push(token, generated);
}

void ContinuousDecoder::step(std::mt19937_64& rng, std::uint64_t version) {
  RLX_REQUIRE(busy());
  torch::NoGradGuard guard;
  const auto B = rows();
  // Observations enter a chunk at a time, with what the row has pending.
  std::vector<std::int64_t> feed(static_cast<std::size_t>(B), 0);
  std::int64_t S = 0, live = 0;
  for (std::size_t b = 0; b < rows_.size(); ++b) {
    auto& r = rows_[b];
    r.sampled = false;
    if (r.state == State::idle) continue;
    while (r.state == State::running && r.next < r.queue.size() && !r.steered[r.next] &&
           static_cast<std::int64_t>(r.seq.tokens.size() - r.fed) < chunk_)
      place(r, r.queue[r.next++], false, 0.0F, 0);
    feed[b] = std::min<std::int64_t>(chunk_, static_cast<std::int64_t>(r.seq.tokens.size() - r.fed));
    RLX_REQUIRE(feed[b] > 0, b);
    S = std::max(S, feed[b]);
    live = std::max(live, static_cast<std::int64_t>(r.fed));
  }
  if (cache_.length + S > cache_.capacity || cache_.length - live > kCompactSlack) {
    compact_cache(cache_);
    ++compactions_;
  }
  // Each row's tokens right-aligned: its last one is at column S - 1, whose
  // logits are its next token's distribution.
  auto tokens = torch::full({B, S}, o_.pad, torch::kLong);
  auto valid = torch::zeros({B, S}, torch::kBool);
  {
    auto tok = tokens.accessor<std::int64_t, 2>();
    auto val = valid.accessor<bool, 2>();
    for (std::size_t b = 0; b < rows_.size(); ++b)
      for (std::int64_t i = 0; i < feed[b]; ++i) {
        tok[static_cast<std::int64_t>(b)][S - feed[b] + i] = rows_[b].seq.tokens[rows_[b].fed + static_cast<std::size_t>(i)];
        val[static_cast<std::int64_t>(b)][S - feed[b] + i] = true;
      }
  }
  auto out = (*model_)->step(tokens, valid, cache_);
  auto routes = out.routes.contiguous();
  auto rts = routes.accessor<std::int64_t, 4>();
  for (std::size_t b = 0; b < rows_.size(); ++b) {
    auto& r = rows_[b];
    for (std::int64_t i = 0; i < feed[b]; ++i)
      for (std::int64_t l = 0; l < layers_; ++l)
        for (std::int64_t k = 0; k < top_k_; ++k) r.seq.routes.push_back(rts[l][static_cast<std::int64_t>(b)][S - feed[b] + i][k]);
    r.fed += static_cast<std::size_t>(feed[b]);
  }
  auto logits = out.logits.select(1, S - 1);
  if (o_.rule) {
    std::vector<const TokenRule::State*> states(rows_.size(), nullptr);
    for (std::size_t b = 0; b < rows_.size(); ++b)
      if (takes_policy_token(rows_[b])) states[b] = rows_[b].rule.get();
    logits = apply_rule(logits, states);
  }
  auto [picked, logp] = sample_tokens(logits, o_, rng);
  torch::Tensor steered_logp;
  for (std::size_t b = 0; b < rows_.size(); ++b) {
    auto& r = rows_[b];
    if (r.state == State::ending && r.fed == r.seq.tokens.size()) {
      finish(b);
      continue;
    }
    if (!takes_policy_token(r)) continue;
    RLX_REQUIRE(room(static_cast<std::int64_t>(b)) > 0, "a sequence with no room left must be ended", b);
    if (r.next < r.queue.size()) {  // a steered token
      if (!steered_logp.defined()) {
        const double temp = o_.greedy ? 1.0 : std::max(1e-4, o_.temperature);
        steered_logp = torch::log_softmax(logits.to(torch::kFloat32) / temp, -1).contiguous();
      }
      const auto token = r.queue[r.next++];
      place(r, token, true, steered_logp[static_cast<std::int64_t>(b)][token].item<float>(), version);
    } else {
      place(r, picked[b], true, logp[b], version);
    }
    r.sampled = true;
  }
  ++steps_;
}

bool ContinuousDecoder::takes_policy_token(const Row& r) {
  // A row with tokens still to feed, or an observation still to place, samples nothing yet.
  return r.state == State::running && r.fed == r.seq.tokens.size() && (r.next == r.queue.size() || r.steered[r.next]);
}

void ContinuousDecoder::finish(std::size_t b) {
  auto& r = rows_[b];
  finished_.push_back(std::move(r.seq));
  r = Row{};
}

std::uint64_t ContinuousDecoder::id(std::int64_t row) const {
  RLX_REQUIRE(!idle(row), row);
  return rows_[static_cast<std::size_t>(row)].seq.id;
}

bool ContinuousDecoder::sampled(std::int64_t row) const {
  RLX_REQUIRE(row >= 0 && row < rows(), row);
  return rows_[static_cast<std::size_t>(row)].sampled;
}

std::int64_t ContinuousDecoder::last_token(std::int64_t row) const {
  RLX_REQUIRE(sampled(row), row);
  return rows_[static_cast<std::size_t>(row)].seq.tokens.back();
}

float ContinuousDecoder::last_log_prob(std::int64_t row) const {
  RLX_REQUIRE(sampled(row), row);
  return rows_[static_cast<std::size_t>(row)].seq.log_probs.back();
}

std::int64_t ContinuousDecoder::room(std::int64_t row) const {
  RLX_REQUIRE(!idle(row), row);
  const auto& r = rows_[static_cast<std::size_t>(row)];
  return r.budget - r.seq.completion_length() - static_cast<std::int64_t>(r.queue.size() - r.next);
}

bool ContinuousDecoder::queued(std::int64_t row) const {
  RLX_REQUIRE(row >= 0 && row < rows(), row);
  const auto& r = rows_[static_cast<std::size_t>(row)];
  return r.next < r.queue.size();
}

void ContinuousDecoder::enqueue(std::int64_t row, const std::vector<std::int64_t>& tokens, bool steered) {
  RLX_REQUIRE(!idle(row) && rows_[static_cast<std::size_t>(row)].state == State::running, row);
  RLX_REQUIRE(static_cast<std::int64_t>(tokens.size()) <= room(row), tokens.size(), room(row));
  auto& r = rows_[static_cast<std::size_t>(row)];
  r.queue.insert(r.queue.end(), tokens.begin(), tokens.end());
  r.steered.insert(r.steered.end(), tokens.size(), steered);
}

void ContinuousDecoder::observe(std::int64_t row, const std::vector<std::int64_t>& tokens) { enqueue(row, tokens, false); }

void ContinuousDecoder::steer(std::int64_t row, const std::vector<std::int64_t>& tokens) { enqueue(row, tokens, true); }

void ContinuousDecoder::end(std::int64_t row) {
  RLX_REQUIRE(!idle(row) && rows_[static_cast<std::size_t>(row)].state == State::running, row);
  auto& r = rows_[static_cast<std::size_t>(row)];
  r.queue.clear();
  r.steered.clear();
  r.next = 0;
  r.sampled = false;
  // Its last tokens are fed by the next step (their routes), unless every one is in already.
  if (r.fed == r.seq.tokens.size()) return finish(static_cast<std::size_t>(row));
  r.state = State::ending;
}

std::vector<Sequence> ContinuousDecoder::take_finished() { return std::exchange(finished_, {}); }

}  // namespace rlx
