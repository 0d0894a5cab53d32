#include <cstdlib>

#include "tests/rollout_log/log_fixture.hpp"

using namespace rlx;
using namespace rlx::test;

TEST_CASE("every log entry reads back in order with its checksum verified", "[replay][log]") {
  TempDir t("rlx-log-roundtrip");
  write_log(LogWriterOptions{t.path}, 10);
  std::vector<LogEntryData> entries;
  auto r = read_all(t.path, false, &entries);
  REQUIRE(r.ok());
  REQUIRE(entries.size() == 1 + 10 + 2);
  for (std::size_t i = 0; i < entries.size(); ++i) CHECK(entries[i].seq == i);
  CHECK(entries[0].kind == LogKind::start);
  CHECK(entries[0].start.config == embedded_cluster_toml());
  CHECK(entries[1].kind == LogKind::rollout);
  CHECK(entries[1].rollout.segment.num_steps == 16);
  CHECK(entries[1].rollout.segment.observations == make_segment(16, 2, 0).observations);
  CHECK(entries[5].kind == LogKind::weights);
  CHECK(entries[5].weights.version == 1);
  CHECK(r->problems.empty());
}

TEST_CASE("the log rotates into several files and reads back as one", "[replay][log]") {
  TempDir t("rlx-log-rotate");
  write_log(LogWriterOptions{t.path, 8 * 1024}, 40);  // ~1.4 KB per segment entry
  auto files = logfiles::list(t.path);
  REQUIRE(files.ok());
  CHECK(files->size() >= 4);
  for (const auto& f : *files) CHECK(fs::exists(f.index_path));
  std::vector<LogEntryData> entries;
  REQUIRE(read_all(t.path, false, &entries).ok());
  CHECK(entries.size() == 1 + 40 + 10);
}

TEST_CASE("zstd-compressed log files read back the same and are smaller", "[replay][log][zstd]") {
  TempDir plain("rlx-log-plain"), packed("rlx-log-zstd");
  write_log(LogWriterOptions{plain.path, 16 * 1024}, 40);
  write_log(LogWriterOptions{packed.path, 16 * 1024, true}, 40);
  auto files = logfiles::list(packed.path);
  REQUIRE(files.ok());
  for (const auto& f : *files) CHECK(f.compressed);
  std::vector<LogEntryData> a, b;
  auto ra = read_all(plain.path, false, &a);
  auto rb = read_all(packed.path, false, &b);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].checksum == b[i].checksum);
  CHECK(rb->bytes == ra->bytes);
  CHECK(rb->stored_bytes < ra->stored_bytes / 2);
}

TEST_CASE("a fresh writer refuses a directory that already holds a log", "[replay][log]") {
  TempDir t("rlx-log-refuse");
  write_log(LogWriterOptions{t.path}, 2);
  auto again = LogWriter::create(LogWriterOptions{t.path});
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("already holds a rollout log") != std::string::npos);
}

TEST_CASE("a truncated last record is named by file and byte offset", "[replay][log][damage]") {
  TempDir t("rlx-log-truncated");
  write_log(LogWriterOptions{t.path}, 6);
  const auto file = logfiles::data_path(t.path, 0);
  auto index = read_index(logfiles::index_path(t.path, 0));
  auto bytes = read_bytes(file);
  bytes.resize(bytes.size() - 10);
  write_bytes(file, bytes);
  auto r = read_all(t.path, false);
  REQUIRE_FALSE(r.ok());
  const std::string msg = r.error().message;
  INFO(msg);
  CHECK(msg.find("rollouts-000000.capnp at byte " + std::to_string(index.back().offset)) != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);
  std::vector<LogEntryData> entries;
  auto skipped = read_all(t.path, true, &entries);
  REQUIRE(skipped.ok());
  CHECK(entries.size() == index.size() - 1);
  CHECK(skipped->problems.size() == 1);
}

TEST_CASE("a flipped byte inside a record fails its checksum, and skipping resumes at the next record", "[replay][log][damage]") {
  TempDir t("rlx-log-flipped");
  write_log(LogWriterOptions{t.path}, 8);
  const auto file = logfiles::data_path(t.path, 0);
  auto index = read_index(logfiles::index_path(t.path, 0));
  const auto& victim = index[3];
  auto bytes = read_bytes(file);
  bytes[victim.offset + victim.bytes - 40] ^= 0x5a;  // inside the segment's data
  write_bytes(file, bytes);
  auto r = read_all(t.path, false);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().message.find("at byte " + std::to_string(victim.offset) + ": corrupt_record") != std::string::npos);
  std::vector<LogEntryData> entries;
  auto skipped = read_all(t.path, true, &entries);
  REQUIRE(skipped.ok());
  CHECK(entries.size() == index.size() - 1);
  CHECK(problem_says(*skipped, "are missing"));  // the gap the skipped record leaves
}

TEST_CASE("damaged framing is skipped by the index, or to the end of the file without one", "[replay][log][damage]") {
  TempDir t("rlx-log-framing");
  write_log(LogWriterOptions{t.path}, 8);
  const auto file = logfiles::data_path(t.path, 0);
  auto index = read_index(logfiles::index_path(t.path, 0));
  auto bytes = read_bytes(file);
  bytes[index[2].offset] = 0xff;  // segment count 256+: nonsense framing
  bytes[index[2].offset + 1] = 0xff;
  write_bytes(file, bytes);
  std::vector<LogEntryData> with_index;
  REQUIRE(read_all(t.path, true, &with_index).ok());
  CHECK(with_index.size() == index.size() - 1);

  fs::remove(logfiles::index_path(t.path, 0));
  std::vector<LogEntryData> without;
  auto r = read_all(t.path, true, &without);
  REQUIRE(r.ok());
  CHECK(without.size() == 2);  // the records before the damage
  CHECK(problem_says(*r, "to the end of the file"));
}

TEST_CASE("a missing index is a warning: the data file is scanned instead", "[replay][log][damage]") {
  TempDir t("rlx-log-noindex");
  write_log(LogWriterOptions{t.path}, 5);
  fs::remove(logfiles::index_path(t.path, 0));
  std::vector<LogEntryData> entries;
  auto r = read_all(t.path, false, &entries);
  REQUIRE(r.ok());
  CHECK(entries.size() == 1 + 5 + 1);
  REQUIRE(r->problems.size() == 1);
  CHECK_FALSE(r->problems[0].fatal);
  CHECK(r->problems[0].what.find("rollouts-000000.idx missing") != std::string::npos);
}

TEST_CASE("a file cut at a record boundary is caught by its index", "[replay][log][damage]") {
  TempDir t("rlx-log-cut");
  write_log(LogWriterOptions{t.path}, 6);
  const auto file = logfiles::data_path(t.path, 0);
  auto index = read_index(logfiles::index_path(t.path, 0));
  auto bytes = read_bytes(file);
  bytes.resize(index[4].offset);
  write_bytes(file, bytes);
  auto r = read_all(t.path, false);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("was cut short") != std::string::npos);
}

TEST_CASE("a missing middle file shows as missing sequence numbers", "[replay][log][damage]") {
  TempDir t("rlx-log-missing-file");
  write_log(LogWriterOptions{t.path, 4 * 1024}, 30);
  fs::remove(logfiles::data_path(t.path, 1));
  auto r = read_all(t.path, false);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("are missing") != std::string::npos);
}

TEST_CASE("random bytes as a log file are reported, never a crash or a hang", "[replay][log][damage][defensive]") {
  TempDir t("rlx-log-garbage");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::uint8_t> junk(static_cast<std::size_t>(rng() % 4096));
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    write_bytes(logfiles::data_path(t.path, 0), junk);
    write_bytes(logfiles::index_path(t.path, 0), std::vector<std::uint8_t>(junk.begin(), junk.begin() + junk.size() / 3));
    auto strict = read_all(t.path, false);
    auto lenient = read_all(t.path, true);
    CHECK((junk.empty() || !strict.ok()));
    CHECK(lenient.ok());
  }
}

TEST_CASE("resuming a log cuts a torn last record and continues the sequence", "[replay][log][resume]") {
  TempDir t("rlx-log-resume");
  write_log(LogWriterOptions{t.path}, 6);
  const auto file = logfiles::data_path(t.path, 0);
  auto bytes = read_bytes(file);
  const auto torn_at = read_index(logfiles::index_path(t.path, 0)).back().offset;
  bytes.resize(bytes.size() - 7);  // a crash in the middle of the last write
  write_bytes(file, bytes);
  std::string repaired;
  auto w = LogWriter::resume(LogWriterOptions{t.path}, &repaired);
  REQUIRE(w.ok());
  CHECK(repaired.find("at byte " + std::to_string(torn_at)) != std::string::npos);
  const std::uint64_t next = (*w)->next_seq();
  CHECK(next == 1 + 6 + 1 - 1);  // the torn last entry is gone
  REQUIRE((*w)->write_start(RunStartData{2, true, "", ""}).ok());
  REQUIRE((*w)->close().ok());
  std::vector<LogEntryData> entries;
  auto r = read_all(t.path, false, &entries);
  REQUIRE(r.ok());
  REQUIRE(entries.size() == next + 1);
  for (std::size_t i = 0; i < entries.size(); ++i) CHECK(entries[i].seq == i);
  CHECK(entries.back().start.resumed);
}

TEST_CASE("a damaged log in the middle is not resumed", "[replay][log][resume][damage]") {
  TempDir t("rlx-log-resume-damaged");
  write_log(LogWriterOptions{t.path}, 6);
  const auto file = logfiles::data_path(t.path, 0);
  auto index = read_index(logfiles::index_path(t.path, 0));
  auto bytes = read_bytes(file);
  bytes[index[2].offset + index[2].bytes - 30] ^= 1;
  write_bytes(file, bytes);
  auto w = LogWriter::resume(LogWriterOptions{t.path}, nullptr);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message.find("cannot resume a damaged log") != std::string::npos);
}

TEST_CASE("the capnp tool reads log entries and index entries with no RLX code", "[replay][log][capnp]") {
  REQUIRE(std::system("command -v capnp > /dev/null 2>&1") == 0);
  TempDir t("rlx-log-capnp");
  write_log(LogWriterOptions{t.path}, 3);
  const auto out = t.path / "decoded.txt";
  const std::string cmd = "cd " RLX_SOURCE_DIR " && capnp decode messages/log.capnp LogEntry < " +
                          logfiles::data_path(t.path, 0).string() + " > " + out.string() +
                          " && capnp decode messages/log.capnp IndexEntry < " +
                          logfiles::index_path(t.path, 0).string() + " >> " + out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text.find("rollout = (") != std::string::npos);
  CHECK(text.find("verdict = trained") != std::string::npos);
  CHECK(text.find("offset = ") != std::string::npos);
}

TEST_CASE("a write that fails mid-entry leaves the log readable to its last whole entry and refuses the rest",
          "[replay][log][damage][infra]") {
  for (const std::uint64_t fail_at : {std::uint64_t{3000}, std::uint64_t{5555}}) {
    DYNAMIC_SECTION("a disk full after " << fail_at << " bytes") {
      TempDir t("rlx-log-full");
      LogWriterOptions o{t.path};
      o.fail_after_bytes = fail_at;  // inside the second or third segment entry (~1.4 KB each)
      auto w = LogWriter::create(o);
      REQUIRE(w.ok());
      REQUIRE((*w)->write_start(RunStartData{1, false, "", ""}).ok());
      std::uint64_t written = 1;
      Result<void> failed;
      for (int i = 0; i < 10 && failed; ++i) {
        RolloutRecordData r{Verdict::trained, 0, static_cast<std::uint64_t>(i), 0, ""};
        failed = (*w)->write_rollout(r, encode(make_segment(16, 2, 0), "test"));
        if (failed) ++written;
      }
      REQUIRE_FALSE(failed.ok());
      CHECK(failed.error().message.find("rollouts-000000") != std::string::npos);
      CHECK(failed.error().message.find("No space left on device") != std::string::npos);
      REQUIRE((*w)->failure());
      // Nothing after a failure is written, not even what would fit again.
      auto refused = (*w)->write_weights(WeightVersionData{1, 1, 1, 1, 1});
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.error().message.find("nothing is written after entry " + std::to_string(written)) != std::string::npos);
      REQUIRE((*w)->close().ok());
      std::vector<LogEntryData> entries;
      auto r = read_all(t.path, false, &entries);  // strict: no damage at all
      INFO((r ? "" : r.error().message));
      REQUIRE(r.ok());
      CHECK(r->problems.empty());
      CHECK(entries.size() == written);
      // And a resumed run can go on from it.
      std::string repaired;
      auto again = LogWriter::resume(LogWriterOptions{t.path}, &repaired);
      REQUIRE(again.ok());
      CHECK(repaired.empty());
      CHECK((*again)->next_seq() == written);
    }
  }
}
