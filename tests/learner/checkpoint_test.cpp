#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "learner/checkpoint.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

Segment varied(std::uint32_t seed, std::uint64_t version) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto s = test::make_segment(16, 4, version);
  s.work = SegmentWork{0.5 + seed, 0.25, 0.125, seed};
  for (auto& o : s.observations) o = u(rng);
  for (auto& a : s.actions) a = static_cast<std::int64_t>(rng() % 2);
  for (auto& r : s.rewards) r = 1.0f + u(rng);
  return s;
}

LearnerCoreOptions checkpoint_core_options() {
  auto cfg = test::default_config();
  LearnerCoreOptions o;
  o.trainer = TrainerOptions{cfg.learner, cfg.policy, 4, 2, 3};
  o.max_staleness = 4;
  o.batch_segments = 2;
  return o;
}

// Feeds `n` segments (training on every full batch).
void feed(LearnerCore& core, std::uint32_t first, std::uint32_t n) {
  for (std::uint32_t i = first; i < first + n; ++i) {
    core.admit(varied(i, core.trainer().version()), "");
    if (core.batch_full()) REQUIRE(core.train().ok());
  }
}

using test::TempDir;

}  // namespace

TEST_CASE("a learner restored from a checkpoint continues bit-identically", "[learner][checkpoint]") {
  TempDir t("rlx-ckpt-continue");
  LearnerCore a(checkpoint_core_options());
  feed(a, 0, 6);
  auto file = save_checkpoint(a, t.path, 3);
  REQUIRE(file.ok());
  auto b = load_checkpoint(*file, checkpoint_core_options());
  REQUIRE(b.ok());
  CHECK(b->core->trainer().version() == a.trainer().version());
  CHECK(b->core->received() == a.received());
  CHECK(b->core->updates() == a.updates());
  CHECK(b->core->stats().env_steps() == a.stats().env_steps());
  CHECK(b->core->stats().work().decode_s == a.stats().work().decode_s);
  CHECK(b->core->stats().work().score_s == 0.125 * 6);
  CHECK(b->core->stats().work().tool_calls == 0 + 1 + 2 + 3 + 4 + 5);
  CHECK(b->core->admission().accepted() == a.admission().accepted());
  CHECK(b->core->weights().checksum == a.weights().checksum);
  // The optimizer moments and the minibatch generator came along too.
  feed(a, 100, 6);
  feed(*b->core, 100, 6);
  CHECK(b->core->weights().checksum == a.weights().checksum);
  CHECK(b->core->trainer().version() == a.trainer().version());
}

TEST_CASE("the last K checkpoints are kept and a damaged one is refused with the reason", "[learner][checkpoint][damage]") {
  TempDir t("rlx-ckpt-keep");
  LearnerCore core(checkpoint_core_options());
  for (int i = 0; i < 4; ++i) {
    feed(core, static_cast<std::uint32_t>(10 * i), 2);
    REQUIRE(save_checkpoint(core, t.path, 3).ok());
  }
  auto files = list_checkpoints(t.path);
  REQUIRE(files.size() == 3);
  CHECK(files[0].filename() == "ckpt-00000004.bin");  // newest first
  CHECK(files[2].filename() == "ckpt-00000002.bin");
  for (const auto& e : fs::directory_iterator(t.path)) CHECK(e.path().extension() == ".bin");  // no .tmp left

  auto bytes = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto write = [&](const fs::path& p, const std::vector<char>& b) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  auto newest = bytes(files[0]);
  newest.resize(newest.size() / 2);  // torn
  write(files[0], newest);
  auto torn = load_checkpoint(files[0], checkpoint_core_options());
  REQUIRE_FALSE(torn.ok());
  CHECK(torn.error().code == Errc::corrupt_record);
  CHECK(torn.error().message.find("the header says") != std::string::npos);
  auto middle = bytes(files[1]);
  middle[middle.size() / 2] ^= 0x10;  // flipped
  write(files[1], middle);
  auto flipped = load_checkpoint(files[1], checkpoint_core_options());
  REQUIRE_FALSE(flipped.ok());
  CHECK(flipped.error().message.find("checksum mismatch") != std::string::npos);
  auto older = load_checkpoint(files[2], checkpoint_core_options());
  REQUIRE(older.ok());
  CHECK(older->core->trainer().version() == 2);
  // Another max_staleness does not fit the recorded histogram.
  auto other = checkpoint_core_options();
  other.max_staleness = 9;
  CHECK_FALSE(load_checkpoint(files[2], other).ok());
}
