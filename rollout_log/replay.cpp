#include "rollout_log/replay.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include <fmt/format.h>

namespace rlx {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string ExactReplay::first_divergence() const {
  if (!mismatches.empty()) {
    const auto& m = mismatches.front();
    return fmt::format("v{} ({} at byte {}): replayed v{} with checksum {:016x}, the log holds {:016x}", m.version,
                       m.where.file, m.where.offset, m.replayed_version, m.replayed_checksum, m.recorded_checksum);
  }
  if (admission_mismatches) return fmt::format("{} segments admitted at another version than the log's", admission_mismatches);
  if (batch_mismatches) return fmt::format("{} failed updates the log records were of another batch", batch_mismatches);
  return "";
}

Result<ExactReplay> replay_exact(const std::filesystem::path& log, const LearnerCoreOptions& core_options,
                                 const ReadOptions& read, const ReplayProgress& progress,
                                 std::shared_ptr<LearnerCore> start) {
  const auto t0 = std::chrono::steady_clock::now();
  ExactReplay out;
  out.core = start ? std::move(start) : std::make_shared<LearnerCore>(core_options);
  LearnerCore& core = *out.core;
  const std::uint64_t held = core.received(), held_version = core.trainer().version();
  // A full batch is trained when the next entry comes, unless that entry
  // says the live update on it failed (the log records arrivals before
  // their batch's update).
  bool due = false;
  auto train_due = [&] {
    if (std::exchange(due, false) && !core.train()) ++out.failed_updates;
  };
  auto report = read_log(log, read, [&](const LogEntryData& e, const LogPosition& at) {
    if ((e.kind == LogKind::rollout || e.kind == LogKind::failed_update) && out.skipped < held) {
      if (e.kind == LogKind::rollout) ++out.skipped;  // the checkpoint has it already
      return true;
    }
    if (e.kind == LogKind::weights && e.weights.version < held_version) return true;
    if (e.kind == LogKind::failed_update) {
      if (due && core.batch_size() == e.failed_update.segments) {
        due = false;
        core.drop_batch();
        ++out.failed_updates;
      } else {
        ++out.batch_mismatches;
      }
      return true;
    }
    train_due();
    if (e.kind == LogKind::rollout) {
      ++out.segments;
      if (e.rollout.record.learner_version != core.trainer().version()) ++out.admission_mismatches;
      std::optional<Segment> seg;
      if (e.rollout.record.verdict != Verdict::rejected) seg = e.rollout.segment;
      core.admit_recorded(e.rollout.record, std::move(seg));
      due = core.batch_full();
    } else if (e.kind == LogKind::weights) {
      ++out.versions_checked;
      // The set as the learner publishes it: in the policy's dtype (a
      // bf16 policy's set is its fp32 masters rounded), as the log holds it.
      const auto checksum = core.encoded_weights(0).checksum;
      const auto version = core.trainer().version();
      out.last_version = version;
      out.last_checksum = checksum;
      if (version == e.weights.version && checksum == e.weights.checksum) {
        ++out.versions_matched;
      } else if (out.mismatches.size() < 8) {
        out.mismatches.push_back({e.weights.version, version, e.weights.checksum, checksum, at});
      }
    }
    if (progress && e.seq % 256 == 0) progress(e.seq + 1, core.updates());
    return true;
  });
  if (!report) return report.error();
  train_due();  // the log's last batch
  out.read = std::move(report).value();
  out.seconds = since(t0);
  return out;
}

Result<OfflineTraining> train_offline(const std::filesystem::path& log, const OfflineOptions& o,
                                      const ReadOptions& read, const OfflineProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  OfflineTraining out;
  std::vector<Segment> data;
  std::vector<std::size_t> trained_at;  // where the records of verdict trained are in `data`
  auto report = read_log(log, read, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind == LogKind::failed_update) {
      // The last batch's update failed: its segments were never trained.
      for (std::uint32_t i = 0; i < e.failed_update.segments && !trained_at.empty(); ++i) {
        data.erase(data.begin() + static_cast<std::ptrdiff_t>(trained_at.back()));
        trained_at.pop_back();
      }
      return true;
    }
    if (e.kind != LogKind::rollout) return true;
    const auto v = e.rollout.record.verdict;
    if (v == Verdict::trained) trained_at.push_back(data.size());
    if (v == Verdict::trained || (v == Verdict::dropped_stale && o.include_stale)) data.push_back(e.rollout.segment);
    return true;
  });
  if (!report) return report.error();
  out.read = std::move(report).value();
  out.segments = data.size();
  if (data.empty()) return make_error(Errc::not_found, log.string() + ": the log holds no segments to train on");
  auto trainer_ptr = make_trainer(o.trainer);
  Trainer& trainer = *trainer_ptr;
  std::vector<std::size_t> order(data.size());
  std::mt19937_64 rng(o.shuffle_seed);
  const std::uint64_t total =
      static_cast<std::uint64_t>(std::max(0, o.passes)) * (o.batch_segments ? data.size() / o.batch_segments : 0);
  for (int pass = 0; pass < o.passes; ++pass) {
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i + o.batch_segments <= order.size(); i += o.batch_segments) {
      std::vector<const Segment*> batch;
      for (std::size_t j = i; j < i + o.batch_segments; ++j) batch.push_back(&data[order[j]]);
      if (trainer.update(batch)) ++out.updates;
      if (progress && out.updates % 16 == 0) progress(out.updates, total);
    }
  }
  out.weights = trainer.weights();
  out.seconds = since(t0);
  return out;
}

Result<RunStartData> first_run_start(const std::filesystem::path& log) {
  std::optional<RunStartData> start;
  ReadOptions ro;
  ro.with_segments = false;
  ro.skip_bad = true;
  auto report = read_log(log, ro, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind == LogKind::start) start = e.start;
    return !start;
  });
  if (!report) return report.error();
  if (!start) return make_error(Errc::not_found, log.string() + ": the log records no run start (pass --config)");
  return *start;
}

}  // namespace rlx
