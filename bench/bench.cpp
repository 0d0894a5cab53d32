#include "bench/bench.hpp"
#include "bench/common.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "assembly/cluster.hpp"
#include "core/progress.hpp"
#include "envs/external/external_env.hpp"
#include "envs/vector_env.hpp"
#include "explorers/rollout.hpp"
#include "messages/codec.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/threads.hpp"
#include "tools/embedded_config.hpp"

namespace rlx {
namespace {


// Raw loop: one thread, one VectorEnv, the policy forward and sampling.
double raw_steps_per_s(const ClusterConfig& cfg, const EnvRegistry& envs, std::uint64_t steps) {
  const EnvFactory& f = *envs.find(cfg.run.env);
  const auto& node = cfg.nodes.front();
  VectorEnv env(f, cfg.run.seed, 0, static_cast<int>(node.envs_per_explorer));
  RolloutOptions ro{0, node.envs_per_explorer, env.spec().obs_dim, env.spec().num_actions, cfg.explorer.segment_steps,
                    cfg.run.seed, cfg.policy};
  Rollout rollout(ro);
  EnvStepResultData r;
  env.reset(r);
  auto t0 = Clock::now();
  std::uint64_t done = 0;
  while (done < steps) {
    auto actions = rollout.act(r.observations);
    env.step(actions, r);
    if (rollout.observe(r)) rollout.take_segment();
    done += static_cast<std::uint64_t>(node.envs_per_explorer);
  }
  return static_cast<double>(done) / seconds_since(t0);
}

// The actor system with training switched off (a batch never fills), so
// the figure is rollout throughput through the explorer, env and learner
// actors (segments are encoded, sent, decoded and admitted).
double actor_steps_per_s(ClusterConfig cfg, const EnvRegistry& envs, int explorers, const std::string& placement,
                         std::uint64_t steps) {
  cfg.nodes.front().explorers = explorers;
  cfg.explorer.env_placement = *choice_of<EnvPlacement>(placement);
  cfg.learner.batch_segments = 1 << 20;
  cfg.run.stop.max_env_steps = steps;
  cfg.run.stop.max_seconds = 300;
  auto t0 = Clock::now();
  RunResult r = run_cluster(cfg, envs, {}, null_logger());
  return static_cast<double>(steps) / seconds_since(t0);
}

std::vector<Row> bench_env_throughput(const EnvRegistry& envs) {
  auto cfg = throughput_config(envs);
  const std::uint64_t steps = 600'000;
  const double cores = std::min<double>(2.0, std::thread::hardware_concurrency());
  // Interleaved rounds, medians: slow phases of a noisy machine hit every variant.
  std::vector<double> raw, a1, l1, a2, l2;
  for (int round = 0; round < 3; ++round) {
    raw.push_back(raw_steps_per_s(cfg, envs, steps / 2));
    a1.push_back(actor_steps_per_s(cfg, envs, 1, "actor", steps));
    l1.push_back(actor_steps_per_s(cfg, envs, 1, "local", steps));
    a2.push_back(actor_steps_per_s(cfg, envs, 2, "actor", steps));
    l2.push_back(actor_steps_per_s(cfg, envs, 2, "local", steps));
  }
  const double r = median(raw);
  std::vector<Row> rows;
  auto row = [&](const char* name, double x, double n) {
    rows.push_back({name, fmt::format("{:.0f}", x), fmt::format("{:.0f} x {:.0f} core(s) (raw loop)", r, n),
                    fmt::format("{:.2f}", x / (r * n)), "per core used; medians of 3 interleaved rounds"});
  };
  row("env steps/s, 1 explorer x 16 envs, env actor", median(a1), 1);
  row("env steps/s, 1 explorer x 16 envs, local envs", median(l1), 1);
  row("env steps/s, 2 explorers x 16 envs, env actors", median(a2), cores);
  row("env steps/s, 2 explorers x 16 envs, local envs", median(l2), cores);
  return rows;
}

// Wall time from start to solved, per seed, and the env steps it took
// (as the run stopped: the learner's count when the return was reached).
// Runs that do not solve within kSolveCap seconds count as infinite.
constexpr double kSolveCap = 120.0;

std::vector<double> time_to_solve(ClusterConfig cfg, const EnvRegistry& envs, int seeds, std::string* notes,
                                  std::vector<double>* steps = nullptr) {
  cfg.run.stop.max_seconds = kSolveCap;
  cfg.run.record = true;  // as the main job runs
  std::vector<double> times;
  for (int s = 1; s <= seeds; ++s) {
    cfg.run.seed = static_cast<std::uint64_t>(s);
    std::atomic<std::uint64_t> at_stop{0};
    RunHooks hooks;
    hooks.on_status = [&at_stop](const Status& st) { at_stop = st.env_steps; };  // the last is the stop's
    auto t0 = Clock::now();
    RunResult r = run_cluster(cfg, envs, hooks, null_logger());
    double t = seconds_since(t0);
    const bool solved = r.outcome == RunOutcome::solved;
    if (!solved) t = std::numeric_limits<double>::infinity();
    times.push_back(t);
    if (steps) steps->push_back(solved ? static_cast<double>(at_stop.load()) : std::numeric_limits<double>::infinity());
    *notes += solved ? fmt::format("{}seed {}: {:.1f} s, {:.0f} K steps", notes->empty() ? "" : ", ", s, t,
                                   static_cast<double>(at_stop.load()) / 1e3)
                     : fmt::format("{}seed {}: not solved in {:.0f} s", notes->empty() ? "" : ", ", s, kSolveCap);
    std::fprintf(stderr, "  %s seed %d: %.1f s (%s)\n", to_string(cfg.run.mode).c_str(), s, t, r.summary.c_str());
  }
  return times;
}

std::vector<Row> bench_solve(const EnvRegistry& envs, int seeds) {
  auto cfg = bench_config(envs);
  std::string notes;
  std::vector<double> steps;
  auto times = time_to_solve(cfg, envs, seeds, &notes, &steps);
  const double worst = *std::max_element(steps.begin(), steps.end());
  return {{"default cluster.toml, wall time to mean return 475", fmt::format("{:.1f} s (median)", median(times)),
           "target <= 10 s", "", notes},
          {"default cluster.toml, env steps to mean return 475",
           fmt::format("{:.0f} K (median), {:.0f} K at most", median(steps) / 1e3, worst / 1e3),
           "target median <= 130 K, none above 250 K", "", ""}};
}

std::vector<Row> bench_async_vs_sync(const EnvRegistry& envs, int seeds) {
  auto cfg = bench_config(envs);
  // The same run both ways: one segment per explorer per update.
  cfg.learner.batch_segments = cfg.total_explorers();
  cfg.explorer.segment_steps *= 2;
  std::string an, sn;
  std::vector<double> as, ss;
  cfg.run.mode = RunMode::async;
  double a = median(time_to_solve(cfg, envs, seeds, &an, &as));
  cfg.run.mode = RunMode::sync;
  double s = median(time_to_solve(cfg, envs, seeds, &sn, &ss));
  return {{"wall time to 475, async (overlapped)", fmt::format("{:.1f} s", a), fmt::format("{:.1f} s sync (alternated)", s),
           fmt::format("{:.2f}", s / a), "async " + an + "; sync " + sn},
          {"env steps to 475, async", fmt::format("{:.0f} K", median(as) / 1e3),
           fmt::format("{:.0f} K sync", median(ss) / 1e3), fmt::format("{:.2f}", median(ss) / median(as)), "medians"}};
}

// Encode + decode of `s` (the decoder checks every field once and views
// the message's tensors) against two memcpy of the same bytes (into a
// message and out of it), in the same run.
Row codec_row(const Segment& s, const std::string& what) {
  const std::size_t bytes = encode(s, "bench").size();
  const int iters = static_cast<int>(std::max<std::size_t>(200, 180'000'000 / bytes));
  auto t0 = Clock::now();
  std::size_t sink = 0;
  for (int i = 0; i < iters; ++i) {
    auto buf = encode(s, "bench");
    auto back = decode<Segment>(buf);
    sink += back->actions.size() + back->actions.is_view();
  }
  double codec = static_cast<double>(bytes) * iters / seconds_since(t0);
  std::vector<char> src(bytes, 1), mid(bytes), dst(bytes);
  t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(mid.data(), src.data(), bytes);
    std::memcpy(dst.data(), mid.data(), bytes);
    src[static_cast<std::size_t>(i) % bytes] = dst[(static_cast<std::size_t>(i) * 7) % bytes];
  }
  double copy = static_cast<double>(bytes) * iters / seconds_since(t0);
  if (sink == 42) std::fprintf(stderr, "%c\n", dst[0]);
  return {fmt::format("segment encode+decode, {} ({} B)", what, bytes), fmt::format("{:.2f} GB/s", codec / 1e9),
          fmt::format("{:.2f} GB/s (2x memcpy)", copy / 1e9), fmt::format("{:.2f}", codec / copy),
          "decode checks every field, tensors viewed in the message"};
}

}  // namespace

Segment agent_token_segment(std::uint32_t rows) {
  const std::uint32_t P = 256, C = 512, T = P + C, B = rows, R = 4;
  Segment s;
  s.num_steps = T;
  s.num_envs = B;
  s.obs_dim = 0;
  s.actions.assign(std::size_t{T} * B, 17);
  s.behaviour_log_probs.assign(std::size_t{T} * B, -0.5f);
  s.rewards.assign(std::size_t{T} * B, 0.0f);
  s.terminated.assign(std::size_t{T} * B, 0);
  s.truncated.assign(std::size_t{T} * B, 0);
  s.policy_versions.assign(T, 3);
  s.episode_returns.assign(B, 1.0f);
  s.episode_lengths.assign(B, C);
  TokenRows k;
  k.prompt_width = P;
  k.prompt_lengths.assign(B, P);
  k.route_width = R;
  k.routes.assign(std::size_t{T} * B * R, 1);
  k.group_size = 4;
  for (std::uint32_t b = 0; b < B; ++b) k.task_ids.push_back(fmt::format("workspace/train/{}", b));
  k.observed.assign(std::size_t{T} * B, 0);
  for (std::size_t t = P; t < T; ++t)
    for (std::size_t b = 0; b < B; ++b) k.observed[t * B + b] = (t / 64) % 3 == 1;
  k.versions.assign(std::size_t{T} * B, 3);
  s.tokens = std::move(k);
  return s;
}

namespace {

std::vector<Row> bench_codec(const EnvRegistry& envs) {
  auto cfg = throughput_config(envs);
  const auto& node = cfg.nodes.front();
  const std::uint32_t T = static_cast<std::uint32_t>(cfg.explorer.segment_steps);
  const std::uint32_t B = static_cast<std::uint32_t>(node.envs_per_explorer), D = 4;
  Segment s;
  s.num_steps = T;
  s.num_envs = B;
  s.obs_dim = D;
  s.observations.assign(std::size_t{T} * B * D, 0.5f);
  s.actions.assign(std::size_t{T} * B, 1);
  s.behaviour_log_probs.assign(std::size_t{T} * B, -0.69f);
  s.rewards.assign(std::size_t{T} * B, 1.0f);
  s.terminated.assign(std::size_t{T} * B, 0);
  s.truncated.assign(std::size_t{T} * B, 0);
  s.policy_versions.assign(T, 3);
  s.bootstrap_observations.assign(std::size_t{B} * D, 0.1f);
  return {codec_row(s, fmt::format("CartPole T={} B={}", T, B)), codec_row(agent_token_segment(), "agent tokens T=768 B=8")};
}

// Steps/s of a BatchEnv alone (fixed actions, no policy), B = 16.
double batch_steps_per_s(BatchEnv& env, int batch_steps) {
  EnvStepResultData r;
  env.reset(r);
  std::vector<std::int64_t> actions(static_cast<std::size_t>(env.size()));
  auto t0 = Clock::now();
  for (int t = 0; t < batch_steps; ++t) {
    for (std::size_t i = 0; i < actions.size(); ++i) actions[i] = static_cast<std::int64_t>((t + i) % 2);
    env.step(actions, r);
  }
  return static_cast<double>(batch_steps) * env.size() / seconds_since(t0);
}

std::vector<Row> bench_external(const EnvRegistry& envs, int seeds) {
  const int B = 16, n = 20000;
  auto python = [&] {
    ExternalEnvOptions o;
    o.argv = {"python3", "examples/envs/cartpole.py"};
    return std::make_unique<ExternalEnv>(o, 1, 0, B);
  };
  auto served = [&](const std::string& protocol) {
    ExternalEnvOptions o;
    o.argv = {"/proc/self/exe", "serve-env", "cartpole", "--protocol", protocol};
    o.protocol = *choice_of<EnvProtocol>(protocol);
    return std::make_unique<ExternalEnv>(o, 1, 0, B);
  };
  VectorEnv builtin(*envs.find("cartpole"), 1, 0, B);
  std::vector<double> py, js, cp, in;
  for (int round = 0; round < 3; ++round) {
    in.push_back(batch_steps_per_s(builtin, n));
    py.push_back(batch_steps_per_s(*python(), n / 4));
    js.push_back(batch_steps_per_s(*served("json"), n));
    cp.push_back(batch_steps_per_s(*served("capnp"), n));
  }
  const double r_in = median(in), r_py = median(py), r_js = median(js), r_cp = median(cp);
  auto overhead_us = [&](double ext) { return (B / ext - B / r_in) * 1e6; };  // per batch step of 16 envs
  std::vector<Row> rows;
  rows.push_back({"Python CartPole via JSON protocol, env steps/s (B=16, no policy)", fmt::format("{:.0f}", r_py),
                  fmt::format("{:.0f} (built-in, in-process)", r_in), fmt::format("{:.3f}", r_py / r_in),
                  fmt::format("{:.1f} us per 16-env step", B / r_py * 1e6)});
  rows.push_back({"protocol overhead, JSON lines (built-in env served by rlx serve-env)", fmt::format("{:.1f} us/step", overhead_us(r_js)),
                  fmt::format("{:.0f} steps/s in-process", r_in), fmt::format("{:.3f}", r_js / r_in),
                  "per request/response of 16 envs"});
  rows.push_back({"protocol overhead, Cap'n Proto framing (rlx serve-env)", fmt::format("{:.1f} us/step", overhead_us(r_cp)),
                  fmt::format("{:.0f} steps/s in-process", r_in), fmt::format("{:.3f}", r_cp / r_in),
                  "per request/response of 16 envs"});
  // The whole job: the Python env against the built-in one, same seeds.
  auto cfg = bench_config(envs);
  cfg.explorer.env_placement = EnvPlacement::local;
  std::string bn, pn;
  double tb = median(time_to_solve(cfg, envs, seeds, &bn));
  cfg.run.env = "exec:python3 examples/envs/cartpole.py";
  double tp = median(time_to_solve(cfg, envs, seeds, &pn));
  rows.push_back({"wall time to 475, Python CartPole (external, local placement)", fmt::format("{:.1f} s", tp),
                  fmt::format("{:.1f} s built-in", tb), fmt::format("{:.2f}", tp / tb),
                  "python " + pn + "; built-in " + bn});
  return rows;
}

}  // namespace

ClusterConfig bench_config(const EnvRegistry& envs) {
  auto c = parse_config(embedded_cluster_toml(), "<embedded cluster.toml>", envs.names());
  RLX_REQUIRE(c.ok(), c.error().message);
  c->run.record = false;
  c->run.log_dir = (std::filesystem::temp_directory_path() / ("rlx-bench-" + std::to_string(getpid()))).string();
  c->run.report_interval_s = 0.5;
  return *c;
}

ClusterConfig throughput_config(const EnvRegistry& envs) {
  auto c = bench_config(envs);
  c.explorer.segment_steps = 64;
  for (auto& node : c.nodes) node.envs_per_explorer = 16;
  return c;
}

int run_benchmarks(const BenchOptions& o) {
  configure_compute_threads(1);  // as run_cluster does for the default topology: baselines get the same
  EnvRegistry envs = builtin_envs();
  std::vector<Row> rows;
  auto want = [&](const char* name) { return o.only.empty() || std::string(name).find(o.only) != std::string::npos; };
  auto add = [&](std::vector<Row> r) {
    for (auto& x : r) {
      std::printf("%-55s %-22s %-34s ratio %-6s %s\n", x.name.c_str(), x.measured.c_str(), x.baseline.c_str(),
                  x.ratio.c_str(), x.note.c_str());
      std::fflush(stdout);
      rows.push_back(std::move(x));
    }
  };
  // Each group in turn; stderr says which, and what remains at the pace so far.
  const std::vector<std::pair<const char*, std::function<std::vector<Row>()>>> groups = {
      {"codec", [&] { return bench_codec(envs); }},
      {"throughput", [&] { return bench_env_throughput(envs); }},
      {"solve", [&] { return bench_solve(envs, o.seeds); }},
      {"async", [&] { return bench_async_vs_sync(envs, o.seeds); }},
      {"external", [&] { return bench_external(envs, o.seeds); }},
      {"recording", [&] { return bench_recording(envs, o.seeds); }},
      {"replay", [&] { return bench_replay(envs); }},
      {"data-parallel", [&] { return bench_data_parallel(envs); }},
      {"nodes", [&] { return bench_nodes(envs); }},
      {"segment-paths", [&] { return bench_segment_paths(envs); }},
      {"deltas", [&] { return bench_deltas(envs); }},
      {"learner-publish", [] { return bench_learner_publish(); }},
      {"sandbox", [] { return bench_sandbox(); }},
      {"tokens", [] { return bench_tokens(); }},
      {"agent", [] { return bench_agent(); }},
      {"gateway", [] { return bench_gateway(); }},
  };
  std::size_t total = 0, done = 0;
  for (const auto& g : groups) total += want(g.first) ? 1 : 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [name, run] : groups) {
    if (!want(name)) continue;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string left = left_text(static_cast<double>(done), static_cast<double>(total), elapsed);
    std::fprintf(stderr, "rlx bench: [%zu/%zu] %s (%s so far%s)\n", done + 1, total, name, human_duration(elapsed).c_str(),
                 left.empty() ? "" : (", " + left + " at the pace so far").c_str());
    add(run());
    ++done;
  }
  if (!o.markdown.empty()) {
    std::ofstream md(o.markdown);
    md << "| benchmark | measured | baseline | ratio | notes |\n|---|---|---|---|---|\n";
    for (const auto& r : rows)
      md << "| " << r.name << " | " << r.measured << " | " << r.baseline << " | " << r.ratio << " | " << r.note << " |\n";
  }
  return 0;
}

}  // namespace rlx
