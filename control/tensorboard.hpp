// Scalars for TensorBoard: an event file (TFRecord framing: length, masked
// CRC-32C of the length, the record, masked CRC-32C of the record; each
// record a serialized Event from control/tensorboard_event.proto) in
// <log_dir>/tensorboard/, one Summary per report with every number of the
// metrics.jsonl line, at step = env steps. CAF-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/run_report.hpp"
#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

// CRC-32C (Castagnoli), and TFRecord's mask of it.
std::uint32_t crc32c(const void* data, std::size_t size);
std::uint32_t masked_crc32c(const void* data, std::size_t size);

// The scalars of one report, tag -> value ("train/mean_return", ...);
// non-finite values are left out (TensorBoard would draw them as gaps anyway).
std::vector<std::pair<std::string, double>> tensorboard_scalars(const MetricsData& learner, const RunCounts& run);

class TensorBoardWriter {
 public:
  // Creates the directory and a new event file in it
  // (events.out.tfevents.<seconds>.<host>.rlx, the name TensorBoard looks for).
  static Result<std::unique_ptr<TensorBoardWriter>> open(const std::filesystem::path& dir);

  // One Summary event; flushed, so a reader sees it at once.
  Result<void> write(std::int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& scalars);
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TensorBoardWriter(std::filesystem::path path);
  Result<void> record(const std::string& bytes);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace rlx
