// TensorBoard's event files ([metrics] tensorboard): CRC-32C against its
// published check value, and a run's file read back by
// tests/control/read_tfevents.py, a reader written from the formats'
// descriptions (TFRecord framing, protobuf's wire format), not from ours.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "control/tensorboard.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

// The reader's output lines, and its exit status.
std::vector<std::string> read_events(const std::filesystem::path& file, int* status) {
  const std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/control/read_tfevents.py '" + file.string() + "' 2>&1";
  auto run = test::run_command(cmd);
  *status = run.status;
  std::vector<std::string> lines;
  std::istringstream in(run.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::uint64_t last_json_uint(const std::filesystem::path& jsonl, const std::string& key) {
  std::ifstream in(jsonl);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const auto at = last.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stoull(last.substr(at + key.size() + 3));
}

}  // namespace

TEST_CASE("CRC-32C gives its published check value and TFRecord's mask of it", "[control][tensorboard]") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  const std::uint32_t c = 0xE3069283u;
  CHECK(masked_crc32c(check.data(), check.size()) == static_cast<std::uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("a run's TensorBoard event file reads back with an independent reader, one summary per report",
          "[control][tensorboard][e2e]") {
  if (!std::filesystem::exists("/usr/bin/python3")) test::skip_test("no /usr/bin/python3");
  test::TempDir dir("rlx-tensorboard-run");
  auto cfg = test::default_config();
  cfg.run.log_dir = dir.path.string();
  cfg.run.stop.max_env_steps = 30'000;
  cfg.run.stop.max_seconds = 0;
  cfg.run.stop.mean_return = 1e9;
  cfg.run.report_interval_s = 0.1;
  const RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  REQUIRE(r.outcome == RunOutcome::budget);

  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path / "tensorboard")) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
  int status = -1;
  const auto lines = read_events(files[0], &status);
  INFO((lines.empty() ? std::string("(no output)") : lines.back()));
  REQUIRE(status == 0);
  REQUIRE(lines.size() >= 3);
  CHECK(lines[0] == "version brain.Event:2");
  // Steps are env steps and never go back; the last summary is the last metrics.jsonl line.
  std::uint64_t previous = 0, last_step = 0;
  std::size_t with_return = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    REQUIRE(lines[i].rfind("step ", 0) == 0);
    const std::uint64_t step = std::stoull(lines[i].substr(5));
    CHECK(step >= previous);
    previous = last_step = step;
    if (lines[i].find(" train/mean_return=") != std::string::npos) ++with_return;
    CHECK(lines[i].find(" segments/trained=") != std::string::npos);
  }
  CHECK(with_return >= 1);
  CHECK(last_step == last_json_uint(dir.path / "metrics.jsonl", "env_steps"));
  const std::string trained = std::to_string(last_json_uint(dir.path / "metrics.jsonl", "segments_trained"));
  CHECK(lines.back().find(" segments/trained=" + trained + ".0") != std::string::npos);

  // The reader checks: one byte changed in a record fails its CRC.
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    char c = 0;
    f.seekg(40);
    f.get(c);
    f.seekp(40);
    f.put(static_cast<char>(c ^ 0x01));
  }
  const auto broken = read_events(files[0], &status);
  CHECK(status == 1);
  REQUIRE_FALSE(broken.empty());
  CHECK(broken.back().find("CRC does not match") != std::string::npos);
}
