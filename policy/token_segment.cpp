#include "policy/token_segment.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace rlx {

Segment token_segment(const Generation& g, const std::vector<float>& rewards, const std::vector<std::string>& task_ids,
                      std::uint32_t group_size, std::uint32_t explorer_id, std::uint64_t sequence) {
  const auto B = g.tokens.size(0), W = g.tokens.size(1), P = g.prompt_width;
  const auto L = g.routes.size(0), K = g.routes.size(3);
  RLX_REQUIRE(static_cast<std::int64_t>(rewards.size()) == B && static_cast<std::int64_t>(task_ids.size()) == B, B);
  Segment s;
  std::vector<std::uint64_t> token_versions;  // per token, when rows were not in lockstep
  s.explorer_id = explorer_id;
  s.sequence = sequence;
  s.num_steps = static_cast<std::uint32_t>(W);
  s.num_envs = static_cast<std::uint32_t>(B);
  s.obs_dim = 0;
  auto tok = g.tokens.t().contiguous(), lp = g.log_probs.t().contiguous();  // [W, B]
  s.actions.assign(tok.data_ptr<std::int64_t>(), tok.data_ptr<std::int64_t>() + W * B);
  s.behaviour_log_probs.assign(lp.data_ptr<float>(), lp.data_ptr<float>() + W * B);
  s.rewards.assign(W * B, 0.0f);
  s.terminated.assign(W * B, 0);
  s.truncated.assign(W * B, 0);
  auto ver = g.versions.accessor<std::int64_t, 2>();
  auto gen = g.generated.accessor<bool, 2>();
  auto valid = g.valid.accessor<bool, 2>();
  // Rows in lockstep sample a column with one version; rows decoded apart
  // (continuous batching) need a version per token.
  bool per_token = false;
  std::uint64_t oldest = UINT64_MAX;
  for (std::int64_t t = P; t < W; ++t) {
    std::int64_t seen = -1;
    for (std::int64_t b = 0; b < B; ++b) {
      if (!gen[b][t]) continue;
      oldest = std::min(oldest, static_cast<std::uint64_t>(ver[b][t]));
      if (seen >= 0 && seen != ver[b][t]) per_token = true;
      seen = ver[b][t];
    }
  }
  std::uint64_t first = 0;
  for (std::int64_t b = 0; b < B && first == 0; ++b) first = static_cast<std::uint64_t>(ver[b][P]);
  if (first == 0 && oldest != UINT64_MAX) first = oldest;
  if (per_token) {
    // Each column carries its oldest token's version (none sampled: the segment's oldest).
    s.policy_versions.assign(W, oldest);
    std::vector<std::uint64_t> tv(static_cast<std::size_t>(W * B), 0);
    for (std::int64_t t = P; t < W; ++t) {
      std::uint64_t col = UINT64_MAX;
      for (std::int64_t b = 0; b < B; ++b)
        if (gen[b][t]) {
          tv[static_cast<std::size_t>(t * B + b)] = static_cast<std::uint64_t>(ver[b][t]);
          col = std::min(col, static_cast<std::uint64_t>(ver[b][t]));
        }
      if (col != UINT64_MAX) s.policy_versions[t] = col;
    }
    token_versions = std::move(tv);
  } else {
    // One version per column: the version of the decoding step that placed
    // it (prompt columns take the first step's).
    // (A token that carries no version, an observation laid out by
    // generation_of, leaves its column the version before it.)
    s.policy_versions.assign(W, first);
    for (std::int64_t t = P; t < W; ++t) {
      s.policy_versions[t] = s.policy_versions[t - 1];
      for (std::int64_t b = 0; b < B; ++b)
        if (valid[b][t] && ver[b][t] != 0) s.policy_versions[t] = static_cast<std::uint64_t>(ver[b][t]);  // sampled or observed
    }
  }
  for (std::int64_t b = 0; b < B; ++b) {
    const auto last = P + g.lengths[b] - 1;
    s.rewards[last * B + b] = rewards[b];
    (g.ended[b] ? s.terminated : s.truncated)[last * B + b] = 1;
    s.episode_returns.push_back(rewards[b]);
    s.episode_lengths.push_back(static_cast<std::uint32_t>(g.lengths[b]));
  }
  TokenRows r;
  r.prompt_width = static_cast<std::uint32_t>(P);
  for (std::int64_t b = 0; b < B; ++b) {
    std::uint32_t n = 0;
    for (std::int64_t t = 0; t < P; ++t) n += valid[b][t];
    r.prompt_lengths.push_back(n);
  }
  r.route_width = static_cast<std::uint32_t>(L * K);
  // [L, B, W, K] -> [W, B, L, K], -1 -> 255.
  auto routes = g.routes.permute({2, 1, 0, 3}).contiguous().masked_fill(g.routes.permute({2, 1, 0, 3}) < 0, 255)
                    .to(torch::kUInt8)
                    .contiguous();
  r.routes.assign(routes.data_ptr<std::uint8_t>(), routes.data_ptr<std::uint8_t>() + routes.numel());
  // Completion tokens the policy did not choose are observations.
  for (std::int64_t t = P; t < W; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      if (valid[b][t] && !gen[b][t]) {
        r.observed.resize(static_cast<std::size_t>(W * B));
        r.observed[static_cast<std::size_t>(t * B + b)] = 1;
      }
  r.group_size = group_size;
  r.task_ids = task_ids;
  r.versions = std::move(token_versions);
  s.tokens = std::move(r);
  return s;
}

TokenRowsBatch token_rows(const std::vector<const Segment*>& segments, std::int64_t layers, std::int64_t top_k) {
  RLX_REQUIRE(!segments.empty());
  std::int64_t P = 0, C = 0, B = 0;
  TokenRowsBatch out;
  out.group_size = INT64_MAX;
  for (const Segment* s : segments) {
    RLX_REQUIRE(s->tokens.has_value());
    P = std::max<std::int64_t>(P, s->tokens->prompt_width);
    for (auto l : s->episode_lengths) C = std::max<std::int64_t>(C, l);
    B += s->num_envs;
    out.group_size = std::min<std::int64_t>(out.group_size, s->tokens->group_size);
  }
  const auto W = P + C;
  auto& g = out.rows;
  g.prompt_width = P;
  g.tokens = torch::zeros({B, W}, torch::kLong);
  g.valid = torch::zeros({B, W}, torch::kBool);
  g.generated = torch::zeros({B, W}, torch::kBool);
  g.log_probs = torch::zeros({B, W}, torch::kFloat32);
  g.versions = torch::zeros({B, W}, torch::kLong);
  g.routes = torch::full({layers, B, W, top_k}, -1, torch::kLong);
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto val = g.valid.accessor<bool, 2>();
  auto gen = g.generated.accessor<bool, 2>();
  auto lp = g.log_probs.accessor<float, 2>();
  auto ver = g.versions.accessor<std::int64_t, 2>();
  auto rt = g.routes.accessor<std::int64_t, 4>();
  std::int64_t row = 0;
  for (const Segment* s : segments) {
    const auto& k = *s->tokens;
    const std::int64_t Bs = s->num_envs, Ps = k.prompt_width, R = k.route_width;
    const std::int64_t layers_here = top_k > 0 ? std::min<std::int64_t>(layers, R / top_k) : 0;
    for (std::int64_t b = 0; b < Bs; ++b, ++row) {
      const std::int64_t n = k.prompt_lengths[b], len = s->episode_lengths[b];
      // Source column t (of this segment) goes to column t + (P - Ps).
      for (std::int64_t t = Ps - n; t < Ps + len; ++t) {
        const auto d = t + (P - Ps);
        const auto i = t * Bs + b;
        tok[row][d] = s->actions[i];
        val[row][d] = true;
        for (std::int64_t l = 0; l < layers_here; ++l)
          for (std::int64_t j = 0; j < top_k; ++j) {
            const auto e = k.routes[i * R + l * top_k + j];
            rt[l][row][d][j] = e == 255 ? -1 : e;
          }
        if (t >= Ps && (k.observed.empty() || !k.observed[i])) {
          gen[row][d] = true;
          lp[row][d] = s->behaviour_log_probs[i];
          ver[row][d] = static_cast<std::int64_t>(k.versions.empty() ? s->policy_versions[t] : k.versions[i]);
        }
      }
      out.rewards.push_back(s->rewards[(Ps + len - 1) * Bs + b]);
      out.masked.push_back(s->step_masked(static_cast<std::size_t>(Ps), static_cast<std::size_t>(b)) ? 1 : 0);
      out.hints.push_back(k.hints.empty() || out.masked.back() ? std::string() : k.hints[b]);
      g.lengths.push_back(len);
      g.ended.push_back(s->terminated[(Ps + len - 1) * Bs + b] != 0);
    }
  }
  return out;
}

}  // namespace rlx
