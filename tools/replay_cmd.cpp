#include "tools/replay_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <unistd.h>

#include "assembly/component_options.hpp"
#include "envs/batch_env.hpp"
#include "explorers/evaluate.hpp"
#include "learner/learner_ranks.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "core/progress.hpp"
#include "policy/threads.hpp"
#include "rollout_log/inspect.hpp"
#include "rollout_log/replay.hpp"

namespace rlx {

namespace {

void print_problems(const ReadReport& r) {
  for (const auto& p : r.problems) std::fprintf(stderr, "rlx: %s %s\n", p.fatal ? "skipped bad record:" : "warning:", describe(p).c_str());
}

// Progress on stderr, at most once a second: `done` of `total` units (0:
// unknown), what that is in words, and what remains at the pace so far.
struct Progress {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
  void operator()(double done, double total, const std::string& what) {
    auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    const double elapsed = std::chrono::duration<double>(now - start).count();
    std::string line = what;
    if (total > 0) {
      line += fmt::format(" ({:.0f}%", 100.0 * std::min(1.0, done / total));
      if (const auto left = left_text(done, total, elapsed); !left.empty()) line += ", " + left;
      line += ")";
    }
    std::fprintf(stderr, "rlx: %s\n", line.c_str());
  }
};

}  // namespace

int replay_command(const ReplayArgs& a) {
  EnvRegistry envs = builtin_envs();
  Result<ClusterConfig> config = make_error(Errc::config_missing, "");
  if (!a.config.empty()) {
    config = load_config(a.config, envs.names());
  } else {
    auto start = first_run_start(a.log);
    if (!start) {
      std::fprintf(stderr, "rlx: %s\n", start.error().message.c_str());
      return 2;
    }
    config = parse_config(start->config, "<config recorded in " + a.log + ">", envs.names());
  }
  if (!config) {
    std::fprintf(stderr, "rlx: %s\n", config.error().message.c_str());
    return 2;
  }
  if (a.mode == "offline" && config->token_run()) {
    std::fprintf(stderr, "rlx: offline replay scores CartPole-style policies; a token run's log replays exactly "
                         "(--mode exact) or is summarised by `rlx inspect` (docs/token-policy.md)\n");
    return 2;
  }
  // The live learner's thread count: part of what makes updates bit-identical.
  configure_compute_threads(static_cast<int>(config->learner.threads));
  const Logger log = null_logger();
  BatchEnvFactory factory;
  EnvSpec spec;
  try {
    factory = make_batch_env_factory(config->run.env, config->external, envs, log);
    spec = factory(config->run.seed, 0, 1)->spec();
  } catch (const EnvFailure& e) {
    std::fprintf(stderr, "rlx: cannot start the environment: %s\n", e.what());
    return 2;
  }
  ReadOptions ro;
  ro.skip_bad = a.skip_bad;
  Progress progress;
  if (a.mode == "exact") {
    // A data-parallel run replays with as many ranks: each rank's slice
    // and the all-reduce are part of what made its weights.
    auto core = learner_core_options(*config, spec);
    const auto rank_file = std::filesystem::temp_directory_path() / ("rlx-replay-" + std::to_string(::getpid()) + ".toml");
    LogOptions quiet;
    quiet.level = "warn";
    // Every rank runs here, whichever hosts the run placed them on.
    ClusterConfig here = *config;
    for (auto& node : here.nodes) {
      node.learner_ranks = 0;
      node.host = "127.0.0.1";
    }
    auto started = LearnerRanks::start_for(here, rank_file, "", make_root_logger(quiet));
    if (!started) {
      std::fprintf(stderr, "rlx: %s\n", started.error().message.c_str());
      return 2;
    }
    std::unique_ptr<LearnerRanks> ranks = std::move(*started);
    if (ranks) core.trainer.group = ranks->group();
    const auto records = indexed_records(a.log);  // what the progress line measures against
    auto r = replay_exact(a.log, core, ro, [&](std::uint64_t entries, std::uint64_t updates) {
      progress(static_cast<double>(entries), records ? static_cast<double>(*records) : 0.0,
               records ? fmt::format("replayed {} of {} entries, {} updates", entries, *records, updates)
                       : fmt::format("replayed {} entries, {} updates", entries, updates));
    });
    if (ranks) {
      ranks->stop();
      std::error_code ec;
      std::filesystem::remove(rank_file, ec);
    }
    if (!r) {
      std::fprintf(stderr, "rlx: %s\n", r.error().message.c_str());
      return 2;
    }
    print_problems(r->read);
    const auto updates = r->core->updates();
    std::printf("exact replay of %s: %llu entries, %llu segments, %llu updates in %.2f s (%.0f segments/s)\n",
                a.log.c_str(), static_cast<unsigned long long>(r->read.entries),
                static_cast<unsigned long long>(r->segments), static_cast<unsigned long long>(updates), r->seconds,
                r->seconds > 0 ? static_cast<double>(r->segments) / r->seconds : 0.0);
    std::printf("versions: %llu recorded, %llu identical; last v%llu checksum %016llx\n",
                static_cast<unsigned long long>(r->versions_checked), static_cast<unsigned long long>(r->versions_matched),
                static_cast<unsigned long long>(r->last_version), static_cast<unsigned long long>(r->last_checksum));
    for (const auto& m : r->mismatches)
      std::printf("  diverged at %s byte %llu: recorded v%llu %016llx, replayed v%llu %016llx\n", m.where.file.c_str(),
                  static_cast<unsigned long long>(m.where.offset), static_cast<unsigned long long>(m.version),
                  static_cast<unsigned long long>(m.recorded_checksum),
                  static_cast<unsigned long long>(m.replayed_version),
                  static_cast<unsigned long long>(m.replayed_checksum));
    if (r->admission_mismatches)
      std::printf("  %llu segments were admitted at another version than recorded\n",
                  static_cast<unsigned long long>(r->admission_mismatches));
    return r->identical() ? 0 : 1;
  }
  OfflineOptions oo;
  oo.trainer = learner_core_options(*config, spec).trainer;
  oo.batch_segments = static_cast<std::size_t>(config->learner.batch_segments);
  oo.passes = a.passes;
  oo.shuffle_seed = config->run.seed;
  auto r = train_offline(a.log, oo, ro, [&](std::uint64_t updates, std::uint64_t total) {
    progress(static_cast<double>(updates), static_cast<double>(total), fmt::format("{} of {} updates", updates, total));
  });
  if (!r) {
    std::fprintf(stderr, "rlx: %s\n", r.error().message.c_str());
    return 2;
  }
  print_problems(r->read);
  EvaluateOptions eo;
  eo.policy = config->policy;
  eo.obs_dim = spec.obs_dim;
  eo.num_actions = spec.num_actions;
  eo.episodes = a.eval_episodes;
  eo.seed = config->run.seed + 1'000'003;  // environments the log never saw
  auto e = evaluate(r->weights, factory, eo);
  if (!e) {
    std::fprintf(stderr, "rlx: evaluation failed: %s\n", e.error().message.c_str());
    return 2;
  }
  std::printf("offline training from %s: %llu segments x %d passes, %llu updates in %.2f s\n", a.log.c_str(),
              static_cast<unsigned long long>(r->segments), a.passes, static_cast<unsigned long long>(r->updates),
              r->seconds);
  std::printf("evaluation (%d greedy episodes on unseen seeds): mean return %.1f (min %.1f, max %.1f)\n", e->episodes,
              e->mean_return, e->min_return, e->max_return);
  return 0;
}

int inspect_command(const InspectArgs& a) {
  ReadOptions ro;
  ro.skip_bad = a.skip_bad;
  auto s = summarise_log(a.log, ro);
  if (!s) {
    std::fprintf(stderr, "rlx: %s\n", s.error().message.c_str());
    return 2;
  }
  if (a.json)
    std::printf("%s\n", summary_json(*s).c_str());
  else
    std::printf("%s", summary_text(*s).c_str());
  if (!a.plot.empty()) {
    auto p = plot_log(*s, a.plot);
    if (!p) {
      std::fprintf(stderr, "rlx: %s\n", p.error().message.c_str());
      return 2;
    }
    std::fprintf(stderr, "rlx: wrote %s\n", a.plot.c_str());
  }
  return 0;
}

int plot_command(const std::string& log_dir, const std::string& out) {
  const std::filesystem::path png = out.empty() ? std::filesystem::path(log_dir) / "metrics.png" : std::filesystem::path(out);
  std::uint64_t bad = 0;
  auto p = plot_metrics(std::filesystem::path(log_dir) / "metrics.jsonl", png, &bad);
  if (!p) {
    std::fprintf(stderr, "rlx: %s\n", p.error().message.c_str());
    return 2;
  }
  if (bad) std::fprintf(stderr, "rlx: warning: skipped %llu unreadable lines\n", static_cast<unsigned long long>(bad));
  std::printf("wrote %s\n", png.string().c_str());
  return 0;
}

}  // namespace rlx
