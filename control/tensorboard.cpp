#include "control/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "control/tensorboard_event.pb.h"

namespace rlx {

namespace {

constexpr std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // the reflected Castagnoli polynomial
    t[i] = c;
  }
  return t;
}
constexpr auto kCrc32cTable = crc32c_table();

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const MetricsData& m, const RunCounts& r) {
  const auto d = [](auto x) { return static_cast<double>(x); };
  std::vector<std::pair<std::string, double>> s = {
      {"train/mean_return", m.mean_return},
      {"train/episodes", d(m.episodes)},
      {"train/policy_version", d(m.policy_version)},
      {"learner/policy_loss", m.policy_loss},
      {"learner/value_loss", m.value_loss},
      {"learner/entropy", m.entropy},
      {"learner/load_balance_loss", m.load_balance_loss},
      {"learner/ratio_mean", m.ratio_mean},
      {"learner/ratio_max", m.ratio_max},
      {"learner/truncated_fraction", m.truncated_fraction},
      {"learner/busy_s", m.busy_s},
      {"learner/updates", d(m.updates)},
      {"staleness/lag_mean", m.lag_mean},
      {"staleness/lag_max", d(m.lag_max)},
      {"segments/trained", d(m.segments_trained)},
      {"segments/dropped_stale", d(m.segments_dropped_stale)},
      {"segments/rejected", d(m.segments_rejected)},
      {"segments/lost", d(r.segments.lost)},
      {"segments/vanished", d(r.segments.vanished)},
      {"failures/rows_masked", d(m.rows_masked)},
      {"failures/reward_retries", d(m.reward_retries)},
      {"time/decode_s", m.decode_s},
      {"time/tool_s", m.tool_s},
      {"time/score_s", m.score_s},
      {"cluster/explorers", d(r.explorers)},
      {"cluster/nodes", d(r.nodes)},
      {"cluster/weight_swap_mean_us", r.weight_swap_mean_us},
      {"cluster/head_rss_mb", d(r.rss_mb)},
  };
  if (r.eval.any) {
    s.emplace_back("eval/pass_at_1", r.eval.pass_at_1);
    s.emplace_back("eval/mean_score", r.eval.mean_score);
  }
  std::erase_if(s, [](const auto& kv) { return !std::isfinite(kv.second); });
  return s;
}

TensorBoardWriter::TensorBoardWriter(std::filesystem::path path) : path_(std::move(path)) {}

Result<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(Errc::io, fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const auto now = std::chrono::system_clock::now();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  // The pid keeps two writers of the same second apart (a resumed run).
  auto path = dir / fmt::format("events.out.tfevents.{}.{}.{}.rlx", seconds, host, ::getpid());
  std::unique_ptr<TensorBoardWriter> w(new TensorBoardWriter(path));
  w->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w->out_) return make_error(Errc::io, "cannot write " + path.string());
  tensorboard::Event first;
  first.set_wall_time(std::chrono::duration<double>(now.time_since_epoch()).count());
  first.set_file_version("brain.Event:2");
  if (auto r = w->record(first.SerializeAsString()); !r) return r.error();
  return w;
}

Result<void> TensorBoardWriter::record(const std::string& bytes) {
  std::string header;
  put_le(header, bytes.size(), 8);
  std::string frame = header;
  put_le(frame, masked_crc32c(header.data(), header.size()), 4);
  frame += bytes;
  put_le(frame, masked_crc32c(bytes.data(), bytes.size()), 4);
  out_.write(frame.data(), static_cast<std::streamsize>(frame.size()));
  out_.flush();
  if (!out_) return make_error(Errc::io, "cannot write " + path_.string());
  return {};
}

Result<void> TensorBoardWriter::write(std::int64_t step, double wall_time,
                                      const std::vector<std::pair<std::string, double>>& scalars) {
  tensorboard::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  auto* summary = e.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    auto* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return record(e.SerializeAsString());
}

}  // namespace rlx
