// Data-parallel learners on CPU: the gradient all-reduce against the
// memory-bandwidth bound, and learner samples/s with 1 and 2 ranks.
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>

#include <fmt/format.h>
#include <torch/torch.h>

#include "assembly/cluster.hpp"
#include "bench/common.hpp"
#include "learner/learner_group.hpp"
#include "learner/token_trainer.hpp"
#include "learner/mlp_trainer.hpp"
#include "policy/token_segment.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/threads.hpp"

namespace rlx {

namespace {

using namespace std::chrono_literals;

// memcpy bandwidth of this machine now (GB/s), the bound's denominator.
double memcpy_gbps(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  return best;
}

// Runs f(rank, group) on two ranks (threads of this process, Gloo over loopback).
template <class F>
auto on_two_ranks(F f) {
  auto store = RendezvousStore::serve("127.0.0.1", 0, 30s);
  RLX_REQUIRE(store.ok(), store.error().message);
  auto run = [&](int rank) {
    auto g = LearnerGroup::join(GroupOptions{rank, 2, "127.0.0.1", (*store)->port(), 30s});
    RLX_REQUIRE(g.ok(), g.error().message);
    return f(rank, **g);
  };
  auto other = std::async(std::launch::async, run, 1);
  auto mine = run(0);
  other.get();
  return mine;
}

// Median seconds of one all-reduce of `numel` floats over two ranks.
double allreduce_s(std::int64_t numel, int reps) {
  return on_two_ranks([&](int, LearnerGroup& g) {
    std::vector<at::Tensor> t{torch::ones({numel})};
    g.average(t);  // warm-up: connections, buffers
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      g.average(t);
      times.push_back(seconds_since(t0));
    }
    return median(times);
  });
}

Segment random_segment(std::uint32_t seed, std::uint32_t T, std::uint32_t B) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  Segment s;
  s.num_steps = T;
  s.num_envs = B;
  s.obs_dim = 4;
  for (std::uint32_t i = 0; i < T * B * 4; ++i) s.observations.push_back(u(rng));
  for (std::uint32_t i = 0; i < T * B; ++i) {
    s.actions.push_back(rng() % 2);
    s.behaviour_log_probs.push_back(-0.69f);
    s.rewards.push_back(1.0f);
    s.terminated.push_back(rng() % 30 == 0);
    s.truncated.push_back(0);
  }
  s.policy_versions.assign(T, 0);
  s.bootstrap_observations.assign(std::size_t{B} * 4, 0.0f);
  return s;
}

// The token learner (the code policy's shape): GRPO updates of 64 rows of
// 160 tokens (8 groups of 8, 3 scored alike, as bench_tokens' row), as
// 1 rank x 64 rows and as 2 ranks x 32 (two threads over Gloo). Returns
// {2 ranks, 1 rank} tokens trained per second, and the gradient bytes.
struct TokenDp {
  double two = 0, one = 0;
  std::int64_t params = 0;
};

TokenDp token_data_parallel(int updates) {
  TokenTrainerOptions o;  // the code policy
  const std::int64_t P = 96, T = 64, G = 8, half = 32;
  SampleOptions so;
  so.max_new_tokens = T;
  so.eos = -1;  // every row exactly T new tokens
  std::mt19937_64 rng(3);
  std::vector<Segment> segs;  // two per update: rank 0's rows, rank 1's
  {
    TokenTrainer sampler(o);
    for (int k = 0; k < updates + 1; ++k)
      for (int part = 0; part < 2; ++part) {
        auto g = generate(sampler.model(), std::vector<std::vector<std::int64_t>>(half, std::vector<std::int64_t>(P, 5)),
                          so, rng);
        // Sampled as if by version k, the version update k trains at: every
        // update trains on fresh tokens (sampled at 0, from the fifth
        // update on they were past max_lag and trained on nothing).
        g.versions.masked_fill_(g.generated, k);
        std::vector<float> rewards;
        for (std::int64_t b = 0; b < half; ++b)
          rewards.push_back(b < (part == 0 ? G : 2 * G) ? 1.0F : static_cast<float>(b % 3) / 2);
        std::vector<std::string> tasks;
        for (std::int64_t b = 0; b < half; ++b) tasks.push_back(std::to_string(b / G));
        segs.push_back(token_segment(g, rewards, tasks, G, 0, segs.size()));
      }
  }
  auto batch_of = [&](std::vector<const Segment*> s) {
    auto r = token_rows(s, o.model.layers, o.model.top_k);
    return TokenBatch{std::move(r.rows), std::move(r.rewards), r.group_size, {}, {}};
  };
  // Update 0 is the warm-up; tokens/s over the rest.
  auto train = [&](TokenTrainer& t, int rank, int world) {
    Clock::time_point t0;
    std::int64_t tokens = 0;
    for (int k = 0; k <= updates; ++k) {
      if (k == 1) t0 = Clock::now();
      std::vector<const Segment*> mine;
      for (int part = 0; part < 2; ++part)
        if (world == 1 || part == rank) mine.push_back(&segs[static_cast<std::size_t>(2 * k + part)]);
      const auto st = t.rl_step(batch_of(mine));
      if (k > 0) tokens += st.tokens;
    }
    return static_cast<double>(tokens) / seconds_since(t0);
  };
  TokenDp r;
  {
    TokenTrainer alone(o);
    for (const auto& p : alone.model()->parameters()) r.params += p.numel();
    r.one = train(alone, 0, 1);
  }
  r.two = on_two_ranks([&](int rank, LearnerGroup& g) {
    auto ro = o;
    ro.group = &g;
    TokenTrainer t(ro);
    return train(t, rank, 2);
  });
  return r;
}

Row token_dp_row() {
  const auto tok = token_data_parallel(6);
  std::fprintf(stderr, "  token learner: 1 rank %.0f, 2 ranks %.0f tokens/s\n", tok.one, tok.two);
  return {"token learner tokens/s (code policy, GRPO), 2 ranks x 32 rows", fmt::format("{:.0f}", tok.two),
          fmt::format("{:.0f} 1 rank x 64 rows", tok.one), fmt::format("{:.2f}", tok.two / tok.one),
          fmt::format("6 updates of 64 rows x 160 tokens, each sampled at the version it trains at; 3 of 8 groups "
                      "scored alike; gradients {:.1f} MB summed once per update",
                      static_cast<double>(tok.params) * 4 / 1e6)};
}

}  // namespace

std::vector<Row> bench_data_parallel(const EnvRegistry& envs) {
  // RLX_BENCH_DP=token: the token learner's row alone.
  if (const char* only = std::getenv("RLX_BENCH_DP"); only && std::string(only) == "token") return {token_dp_row()};
  auto cfg = throughput_config(envs);
  const auto T = static_cast<std::uint32_t>(cfg.explorer.segment_steps);
  const auto Benv = static_cast<std::uint32_t>(cfg.nodes.front().envs_per_explorer);
  std::vector<Row> rows;
  const double gbps = memcpy_gbps(std::size_t{256} << 20);
  auto policy = make_seeded_policy(PolicyOptions{4, 2, cfg.policy.hidden, cfg.policy.experts, cfg.policy.top_k}, 1);
  std::int64_t params = 0;
  for (const auto& p : policy->parameters()) params += p.numel();
  struct Size { std::string name; std::int64_t numel; int reps; };
  for (const Size& s : {Size{fmt::format("the policy's gradients ({} parameters)", params), params, 200},
                        Size{"1M parameters", 1'000'000, 30}, Size{"25M parameters", 25'000'000, 5}}) {
    const double t = allreduce_s(s.numel, s.reps);
    const double bytes = static_cast<double>(s.numel) * 4;
    // Two ranks: each sends its buffer and receives the other's; at least
    // read + write of 2x the bytes through memory.
    const double bound = 2 * bytes / (gbps * 1e9);
    rows.push_back({"all-reduce, 2 ranks, " + s.name, fmt::format("{:.1f} us", t * 1e6),
                    fmt::format("{:.1f} us (2 x {:.2f} MB at {:.1f} GB/s memcpy)", bound * 1e6, bytes / 1e6, gbps),
                    fmt::format("{:.2f}", bound / t), fmt::format("{:.2f} GB/s effective", bytes / t / 1e9)});
    std::fprintf(stderr, "  all-reduce %s: %.1f us\n", s.name.c_str(), t * 1e6);
  }

  // Learner samples/s: the default trainer settings, B = batch_segments per rank.
  const auto B = static_cast<std::size_t>(cfg.learner.batch_segments);
  constexpr int kUpdates = 12;
  std::vector<Segment> segs;
  for (std::uint32_t i = 0; i < 2 * B * kUpdates; ++i) segs.push_back(random_segment(i, T, Benv));
  const double steps_per_seg = static_cast<double>(T) * Benv;
  TrainerOptions base{cfg.learner, cfg.policy, 4, 2, 1};
  // 1 rank x B, 1 rank x 2B, 2 ranks x B (each 1 compute thread, as run_cluster sets).
  auto alone = [&](std::size_t batch) {
    MlpTrainer t(base);
    const auto t0 = Clock::now();
    for (int k = 0; k < kUpdates; ++k) {
      std::vector<const Segment*> b;
      for (std::size_t i = 0; i < batch; ++i) b.push_back(&segs[k * batch + i]);
      (void)t.update(b);
    }
    return static_cast<double>(kUpdates * batch) * steps_per_seg / seconds_since(t0);
  };
  const double one_b = alone(B), one_2b = alone(2 * B);
  const double two = on_two_ranks([&](int rank, LearnerGroup& g) {
    auto o = base;
    o.group = &g;
    MlpTrainer t(o);
    const auto t0 = Clock::now();
    for (int k = 0; k < kUpdates; ++k) {
      std::vector<const Segment*> b;
      for (std::size_t i = 0; i < B; ++i) b.push_back(&segs[k * 2 * B + static_cast<std::size_t>(rank) * B + i]);
      (void)t.update(b);
    }
    return static_cast<double>(kUpdates * 2 * B) * steps_per_seg / seconds_since(t0);
  });
  // The whole job, equal budget: ranks compete with explorers for 2 cores.
  std::vector<double> job1, job2;
  for (int round = 0; round < 3; ++round) {
    for (int ranks : {1, 2}) {
      auto c = cfg;
      c.learner.ranks = ranks;
      c.learner.batch_segments = ranks == 1 ? static_cast<std::int64_t>(2 * B) : static_cast<std::int64_t>(B);
      c.run.stop.mean_return = 1e9;
      c.run.stop.max_env_steps = 150'000;
      const auto t0 = Clock::now();
      run_cluster(c, envs, {}, null_logger());
      (ranks == 1 ? job1 : job2).push_back(150'000.0 / seconds_since(t0));
    }
    std::fprintf(stderr, "  job round %d: 1 rank %.0f, 2 ranks %.0f steps/s\n", round + 1, job1.back(), job2.back());
  }
  rows.push_back({fmt::format("main job env steps/s, 2 ranks x {} segments", B), fmt::format("{:.0f}", median(job2)),
                  fmt::format("{:.0f} 1 rank x {} segments", median(job1), 2 * B),
                  fmt::format("{:.2f}", median(job2) / median(job1)), "3 rounds alternated, 150,000 steps each, median"});
  rows.push_back({fmt::format("learner samples/s, 2 ranks x {} segments", B), fmt::format("{:.0f}", two),
                  fmt::format("{:.0f} 1 rank x {} segments", one_2b, 2 * B), fmt::format("{:.2f}", two / one_2b),
                  fmt::format("same samples per update; 1 rank x {} segments: {:.0f}/s", B, one_b)});
  rows.push_back(token_dp_row());
  return rows;
}

}  // namespace rlx
