#include "policy/token_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "policy/rule_masks.hpp"

namespace rlx {

std::pair<std::vector<std::int64_t>, std::vector<float>> sample_tokens(const torch::Tensor& logits,
                                                                       const SampleOptions& o, std::mt19937_64& rng) {
  const double temp = o.greedy ? 1.0 : std::max(1e-4, o.temperature);
  auto logp = torch::log_softmax(logits.to(torch::kFloat32) / temp, -1).contiguous();
  const auto B = logp.size(0), V = logp.size(1);
  const float* lp = logp.data_ptr<float>();
  std::vector<std::int64_t> tokens(B);
  std::vector<float> out(B);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::int64_t> order(V);
  for (std::int64_t b = 0; b < B; ++b) {
    const float* row = lp + b * V;
    std::int64_t pick = 0;
    if (o.greedy) {
      pick = std::max_element(row, row + V) - row;
    } else {
      // The nucleus: the most likely tokens whose mass first reaches top_p.
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](auto a, auto c) { return row[a] > row[c]; });
      double mass = 0;
      std::int64_t n = 0;
      while (n < V && (n == 0 || mass < o.top_p)) mass += std::exp(static_cast<double>(row[order[n++]]));
      double r = u(rng) * mass, acc = 0;
      pick = order[n - 1];
      for (std::int64_t i = 0; i < n; ++i) {
        acc += std::exp(static_cast<double>(row[order[i]]));
        if (r < acc) {
          pick = order[i];
          break;
        }
      }
    }
    tokens[b] = pick;
    out[b] = row[pick];
  }
  return {tokens, out};
}

Decoder::Decoder(MoETransformer& model, const std::vector<std::vector<std::int64_t>>& prompts,
                 const SampleOptions& o)
    : model_(&model), o_(o) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  RLX_REQUIRE(B > 0);
  std::int64_t P = 0;
  for (const auto& p : prompts) P = std::max<std::int64_t>(P, static_cast<std::int64_t>(p.size()));
  RLX_REQUIRE(P > 0 && o.max_new_tokens > 0, P, o.max_new_tokens);
  const auto W = P + o.max_new_tokens;
  const auto layers = model->options().layers, k = model->options().top_k;
  RLX_REQUIRE(W <= model->options().max_len, W, model->options().max_len);
  auto i64 = torch::TensorOptions().dtype(torch::kLong);
  g_.prompt_width = P;
  g_.tokens = torch::full({B, W}, o.pad, i64);
  g_.valid = torch::zeros({B, W}, i64.dtype(torch::kBool));
  g_.generated = torch::zeros({B, W}, i64.dtype(torch::kBool));
  g_.log_probs = torch::zeros({B, W}, i64.dtype(torch::kFloat32));
  g_.versions = torch::zeros({B, W}, i64);
  g_.routes = torch::full({layers, B, W, k}, -1, i64);
  g_.lengths.assign(B, 0);
  g_.ended.assign(B, false);
  active_.assign(B, true);
  queue_.assign(B, {});
  last_.assign(B, o.pad);
  last_generated_.assign(B, false);
  auto tok = g_.tokens.accessor<std::int64_t, 2>();
  auto val = g_.valid.accessor<bool, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto n = static_cast<std::int64_t>(prompts[b].size());
    for (std::int64_t i = 0; i < n; ++i) {
      tok[b][P - n + i] = prompts[b][i];
      val[b][P - n + i] = true;
    }
    if (o.rule) {
      rule_.push_back(o.rule->start());
      for (auto token : prompts[b]) rule_.back()->push(token, false);
    }
  }
  if (o.use_cache) cache_ = model->new_cache(B, W);
}

bool Decoder::step(std::mt19937_64& rng, std::uint64_t version) {
  RLX_REQUIRE(!done_);
  torch::NoGradGuard guard;
  auto& model = *model_;
  const auto B = g_.tokens.size(0), P = g_.prompt_width, t = t_;
  const auto end = P + t;  // tokens [0, end) are known
  TransformerOutput out;
  if (!o_.use_cache) {
    out = model->forward(g_.tokens.narrow(1, 0, end), g_.valid.narrow(1, 0, end));
  } else if (t == 0) {
    out = model->step(g_.tokens.narrow(1, 0, P), g_.valid.narrow(1, 0, P), cache_);
  } else {
    out = model->step(g_.tokens.narrow(1, end - 1, 1), g_.valid.narrow(1, end - 1, 1), cache_);
  }
  // The routes of the newest input token(s) (the prompts' on the prefill).
  const auto fresh = o_.use_cache ? out.routes.size(2) : (t == 0 ? P : 1);
  g_.routes.narrow(2, end - fresh, fresh).copy_(out.routes.narrow(2, out.routes.size(2) - fresh, fresh));
  auto logits = out.logits.select(1, out.logits.size(1) - 1);
  if (o_.rule) {  // rows whose next token is an observation's are not restricted
    std::vector<const TokenRule::State*> states(static_cast<std::size_t>(B), nullptr);
    for (std::int64_t b = 0; b < B; ++b)
      if (active_[b] && (!queued(b) || queue_[b].generated)) states[b] = rule_[b].get();
    logits = apply_rule(logits, states);
  }
  auto [picked, logp] = sample_tokens(logits, o_, rng);
  // Steered rows take their queued token with its log-probability at the
  // sampling temperature (as sample_tokens scores its picks).
  torch::Tensor steered_logp;
  for (std::int64_t b = 0; b < B && !steered_logp.defined(); ++b)
    if (active_[b] && queued(b) && queue_[b].generated) {
      const double temp = o_.greedy ? 1.0 : std::max(1e-4, o_.temperature);
      steered_logp = torch::log_softmax(logits.to(torch::kFloat32) / temp, -1).contiguous();
    }
  auto tok = g_.tokens.accessor<std::int64_t, 2>();
  auto val = g_.valid.accessor<bool, 2>();
  auto gen = g_.generated.accessor<bool, 2>();
  auto lps = g_.log_probs.accessor<float, 2>();
  auto ver = g_.versions.accessor<std::int64_t, 2>();
  bool any = false;
  for (std::int64_t b = 0; b < B; ++b) {
    if (!active_[b]) continue;
    auto& q = queue_[b];
    const bool from_queue = q.next < q.tokens.size();
    const bool policy = !from_queue || q.generated;
    const auto token = from_queue ? q.tokens[q.next++] : picked[b];
    tok[b][end] = token;
    val[b][end] = true;
    gen[b][end] = policy;
    lps[b][end] = !policy ? 0.0F : from_queue ? steered_logp[b][token].item<float>() : logp[b];
    ver[b][end] = static_cast<std::int64_t>(version);
    last_[b] = token;
    last_generated_[b] = policy;
    if (o_.rule) rule_[b]->push(token, policy);
    ++g_.lengths[b];
    if (!from_queue && o_.end_at_eos && token == o_.eos) {
      active_[b] = false;
      g_.ended[b] = true;
    }
    any = any || active_[b];
  }
  newest_ = std::max(newest_, version);
  ++t_;
  done_ = !any || t_ == o_.max_new_tokens;
  return done_;
}

std::int64_t Decoder::last_token(std::int64_t row) const {
  RLX_REQUIRE(t_ > 0 && row >= 0 && row < rows(), t_, row);
  return last_[static_cast<std::size_t>(row)];
}

bool Decoder::last_generated(std::int64_t row) const {
  RLX_REQUIRE(t_ > 0 && row >= 0 && row < rows(), t_, row);
  return last_generated_[static_cast<std::size_t>(row)];
}

bool Decoder::queued(std::int64_t row) const {
  const auto& q = queue_[static_cast<std::size_t>(row)];
  return q.next < q.tokens.size();
}

void Decoder::observe(std::int64_t row, const std::vector<std::int64_t>& tokens) {
  RLX_REQUIRE(row >= 0 && row < rows() && active(row) && !queued(row), row);
  queue_[static_cast<std::size_t>(row)] = Queued{tokens, 0, false};
}

void Decoder::steer(std::int64_t row, const std::vector<std::int64_t>& tokens) {
  RLX_REQUIRE(row >= 0 && row < rows() && active(row) && !queued(row), row);
  queue_[static_cast<std::size_t>(row)] = Queued{tokens, 0, true};
}

void Decoder::end_row(std::int64_t row) {
  RLX_REQUIRE(row >= 0 && row < rows() && active(row), row);
  active_[static_cast<std::size_t>(row)] = false;
  queue_[static_cast<std::size_t>(row)] = {};
  g_.ended[static_cast<std::size_t>(row)] = true;
  done_ = done_ || std::none_of(active_.begin(), active_.end(), [](bool a) { return a; });
}

Generation Decoder::finish() {
  RLX_REQUIRE(done_);
  torch::NoGradGuard guard;
  auto& model = *model_;
  // The tokens sampled by the last step were never an input: one more
  // pass over them records their routes.
  const auto used = g_.prompt_width + *std::max_element(g_.lengths.begin(), g_.lengths.end());
  {
    const auto col = used - 1;
    auto routes = o_.use_cache ? model->step(g_.tokens.narrow(1, col, 1), g_.valid.narrow(1, col, 1), cache_).routes
                               : model->forward(g_.tokens.narrow(1, 0, used), g_.valid.narrow(1, 0, used)).routes;
    g_.routes.narrow(2, col, 1).copy_(routes.narrow(2, routes.size(2) - 1, 1));
  }
  Generation g = std::move(g_);
  g.tokens = g.tokens.narrow(1, 0, used).contiguous();
  g.valid = g.valid.narrow(1, 0, used).contiguous();
  g.generated = g.generated.narrow(1, 0, used).contiguous();
  g.log_probs = g.log_probs.narrow(1, 0, used).contiguous();
  g.versions = g.versions.narrow(1, 0, used).contiguous();
  g.routes = g.routes.narrow(2, 0, used).contiguous();
  return g;
}

std::vector<std::int64_t> completion(const Generation& g, std::int64_t row) {
  auto r = g.tokens[row].narrow(0, g.prompt_width, g.lengths[row]).contiguous();
  return {r.data_ptr<std::int64_t>(), r.data_ptr<std::int64_t>() + r.numel()};
}

Generation generate(MoETransformer& model, const std::vector<std::vector<std::int64_t>>& prompts,
                    const SampleOptions& o, std::mt19937_64& rng, const BeforeStep& before_step) {
  Decoder d(model, prompts, o);
  for (std::int64_t t = 0; !d.done(); ++t) d.step(rng, before_step ? before_step(t) : 0);
  return d.finish();
}

}  // namespace rlx
