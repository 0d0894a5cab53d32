// The rollout log's costs: env steps/s of the main job with and without
// recording (and with zstd), log bytes per env step, and exact replay's
// speed against the learner's own training rate on the same segments.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "assembly/component_options.hpp"
#include "assembly/cluster.hpp"
#include "bench/common.hpp"
#include "envs/batch_env.hpp"
#include "messages/codec.hpp"
#include "rollout_log/log_writer.hpp"
#include "rollout_log/replay.hpp"

namespace rlx {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kSteps = 150'000;

struct Timed {
  double steps_per_s = 0;
  std::uint64_t log_bytes = 0, steps = 0;
};

Timed timed_run(ClusterConfig cfg, const EnvRegistry& envs, bool record, bool zstd) {
  cfg.run.record = record;
  cfg.record.compress = zstd ? "zstd" : "none";
  cfg.run.stop.mean_return = 1e9;  // the budget decides: equal work either way
  cfg.run.stop.max_env_steps = kSteps;
  fs::remove_all(cfg.run.log_dir);
  const auto t0 = Clock::now();
  run_cluster(cfg, envs, {}, null_logger());
  Timed t;
  t.steps_per_s = static_cast<double>(kSteps) / seconds_since(t0);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(cfg.run.log_dir) / "rollouts", ec))
    if (e.path().extension() != ".idx") t.log_bytes += e.file_size();
  t.steps = kSteps;
  return t;
}

// The recorder's own cost per segment: LogWriter (copy into a LogEntry,
// canonicalise + xxh64, index entry, two flushed writes) against writing
// the segment's bytes raw with one flushed write.
Row writer_cost(const ClusterConfig& cfg) {
  const auto T = static_cast<std::uint32_t>(cfg.explorer.segment_steps);
  const auto B = static_cast<std::uint32_t>(cfg.nodes.front().envs_per_explorer);
  Segment s;
  s.num_steps = T;
  s.num_envs = B;
  s.obs_dim = 4;
  s.observations.assign(std::size_t{T} * B * 4, 0.01f);
  s.actions.assign(std::size_t{T} * B, 1);
  s.behaviour_log_probs.assign(std::size_t{T} * B, -0.69f);
  s.rewards.assign(std::size_t{T} * B, 1.0f);
  s.terminated.assign(std::size_t{T} * B, 0);
  s.truncated.assign(std::size_t{T} * B, 0);
  s.policy_versions.assign(T, 0);
  s.bootstrap_observations.assign(std::size_t{B} * 4, 0.0f);
  const WireBuffer env = encode(s, "bench");
  constexpr int kN = 2000;
  const fs::path dir = fs::path(cfg.run.log_dir) / "writer-bench";
  fs::remove_all(dir);
  auto w = LogWriter::create(LogWriterOptions{dir});
  RLX_REQUIRE(w.ok(), w.error().message);
  auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i) (void)(*w)->write_rollout(RolloutRecordData{Verdict::trained, 0, std::uint64_t(i), 0, ""}, env);
  (void)(*w)->close();
  const double writer_s = seconds_since(t0);
  std::FILE* raw = std::fopen((dir / "raw.bin").c_str(), "wb");
  t0 = Clock::now();
  for (int i = 0; i < kN; ++i) {
    std::fwrite(env.bytes().data(), 1, env.size(), raw);
    std::fflush(raw);
  }
  std::fclose(raw);
  const double raw_s = seconds_since(t0);
  fs::remove_all(dir);
  return {"rollout log append, one segment", fmt::format("{:.1f} us ({} B)", writer_s / kN * 1e6, env.size()),
          fmt::format("{:.1f} us raw fwrite+fflush", raw_s / kN * 1e6), fmt::format("{:.2f}", raw_s / writer_s),
          fmt::format("{} appends; at the main job's ~20 segments/s that is {:.2f}% of one core", kN,
                      writer_s / kN * 20 * 100)};
}

}  // namespace

std::vector<Row> bench_recording(const EnvRegistry& envs, int rounds) {
  auto cfg = throughput_config(envs);
  std::vector<double> off, on, zstd;
  std::uint64_t bytes_on = 0, bytes_zstd = 0;
  for (int i = 0; i < rounds; ++i) {  // alternated, so drift hits all three alike
    off.push_back(timed_run(cfg, envs, false, false).steps_per_s);
    auto a = timed_run(cfg, envs, true, false);
    auto b = timed_run(cfg, envs, true, true);
    on.push_back(a.steps_per_s);
    zstd.push_back(b.steps_per_s);
    bytes_on = a.log_bytes;
    bytes_zstd = b.log_bytes;
    std::fprintf(stderr, "  round %d: off %.0f, on %.0f, zstd %.0f steps/s\n", i + 1, off.back(), on.back(), zstd.back());
  }
  const double o = median(off), a = median(on), z = median(zstd);
  const double per_step = static_cast<double>(bytes_on) / static_cast<double>(kSteps);
  const double per_step_z = static_cast<double>(bytes_zstd) / static_cast<double>(kSteps);
  return {
      writer_cost(cfg),
      {"main job env steps/s, recording on", fmt::format("{:.0f}", a), fmt::format("{:.0f} recording off", o),
       fmt::format("{:.2f}", a / o), fmt::format("{} rounds alternated, {} steps each, median", rounds, kSteps)},
      {"main job env steps/s, recording on + zstd", fmt::format("{:.0f}", z), fmt::format("{:.0f} recording off", o),
       fmt::format("{:.2f}", z / o), "files compressed when closed (the last at the end of the run)"},
      {"rollout log bytes per env step", fmt::format("{:.1f} B (zstd {:.1f} B)", per_step, per_step_z),
       "the step itself: obs 4 x f32 + action i64 + logp f32 + reward f32 + 2 flags = 34 B", fmt::format("{:.2f}", per_step / 34.0),
       fmt::format("zstd ratio {:.2f}", per_step_z / per_step)},
  };
}

std::vector<Row> bench_replay(const EnvRegistry& envs) {
  auto cfg = throughput_config(envs);
  timed_run(cfg, envs, true, false);
  const fs::path log = fs::path(cfg.run.log_dir) / "rollouts";
  const EnvSpec spec = make_batch_env_factory(cfg.run.env, cfg.external, envs, null_logger())(1, 0, 1)->spec();
  const LearnerCoreOptions core = learner_core_options(cfg, spec);
  auto replay = replay_exact(log, core, ReadOptions{});
  RLX_REQUIRE(replay.ok(), replay.error().message);
  const double replay_rate = static_cast<double>(replay->segments) / replay->seconds;
  // Baseline: the learner's own rate, the same trained segments already in
  // memory, straight into the Trainer.
  std::vector<Segment> segments;
  RLX_REQUIRE(read_log(log, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
                if (e.kind == LogKind::rollout && e.rollout.record.verdict == Verdict::trained)
                  segments.push_back(e.rollout.segment);
                return true;
              }).ok());
  auto trainer = make_trainer(core.trainer);
  const auto t0 = Clock::now();
  std::size_t done = 0;
  for (std::size_t i = 0; i + core.batch_segments <= segments.size(); i += core.batch_segments) {
    std::vector<const Segment*> batch;
    for (std::size_t j = i; j < i + core.batch_segments; ++j) batch.push_back(&segments[j]);
    (void)trainer->update(batch);
    done += core.batch_segments;
  }
  const double raw_rate = static_cast<double>(done) / seconds_since(t0);
  // Reading alone (decode + checksum, no training).
  const auto t1 = Clock::now();
  std::uint64_t n = 0;
  RLX_REQUIRE(read_log(log, ReadOptions{}, [&](const LogEntryData&, const LogPosition&) { return ++n, true; }).ok());
  const double read_s = seconds_since(t1);
  return {
      {"exact replay, segments/s", fmt::format("{:.1f}", replay_rate), fmt::format("{:.1f} Trainer alone", raw_rate),
       fmt::format("{:.2f}", replay_rate / raw_rate),
       fmt::format("{} segments, {} versions identical of {}; reading + verifying the log alone: {:.0f} entries/s",
                   replay->segments, replay->versions_matched, replay->versions_checked,
                   static_cast<double>(n) / read_s)},
  };
}

}  // namespace rlx
