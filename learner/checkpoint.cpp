#include "learner/checkpoint.hpp"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>

#include "core/files.hpp"

namespace rlx {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'R', 'L', 'X', 'C', 'K', 'P', 'T', '1'};

Error io_error(const fs::path& p, const std::string& what) {
  return make_error(Errc::io, fmt::format("{}: {}: {}", p.string(), what, std::strerror(errno)));
}

// Little-endian fields, length-prefixed vectors; reads are bounds-checked.
struct Writer {
  std::vector<std::uint8_t> out;
  void u64(std::uint64_t x) {
    const auto at = out.size();
    out.resize(at + 8);
    std::memcpy(out.data() + at, &x, 8);
  }
  void f64(double x) { u64(std::bit_cast<std::uint64_t>(x)); }
  template <class T>
  void vec(const std::vector<T>& v) {
    u64(v.size());
    const auto at = out.size();
    out.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof(T));
  }
};

struct Reader {
  std::span<const std::uint8_t> in;
  std::size_t at = 0;
  bool ok = true;
  std::uint64_t u64() {
    std::uint64_t x = 0;
    if (in.size() - at < 8) return ok = false, 0;
    std::memcpy(&x, in.data() + at, 8);
    at += 8;
    return x;
  }
  double f64() { return std::bit_cast<double>(u64()); }
  template <class T>
  std::vector<T> vec() {
    const auto bytes = raw(sizeof(T));
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  // A length-prefixed vector's bytes where they lie (elements of `width` bytes).
  std::span<const std::uint8_t> raw(std::size_t width) {
    const std::uint64_t n = u64();
    if (!ok || n > (in.size() - at) / width) return ok = false, std::span<const std::uint8_t>{};
    const auto out = in.subspan(at, n * width);
    at += n * width;
    return out;
  }
};

// A file's bytes mapped read-only (a checkpoint may be many GB: read in
// place, never copied whole).
struct MappedFile {
  void* base = MAP_FAILED;
  std::size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
  std::span<const std::uint8_t> bytes() const {
    if (base == MAP_FAILED) return {};
    return std::span(static_cast<const std::uint8_t*>(base), size);
  }
};

Result<std::shared_ptr<MappedFile>> map_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return io_error(path, "cannot open");
  struct stat st {};
  auto m = std::make_shared<MappedFile>();
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    m->size = static_cast<std::size_t>(st.st_size);
    m->base = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  const int err = errno;
  ::close(fd);
  errno = err;
  if (st.st_size > 0 && m->base == MAP_FAILED) return io_error(path, "cannot map");
  return m;
}

std::uint64_t version_of(const fs::path& p) {
  const std::string n = p.filename().string();  // ckpt-00000042.bin
  if (n.size() < 10 || n.rfind("ckpt-", 0) != 0 || p.extension() != ".bin") return UINT64_MAX;
  try {
    return std::stoull(n.substr(5, n.size() - 9));
  } catch (const std::exception&) {
    return UINT64_MAX;
  }
}

}  // namespace

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && version_of(e.path()) != UINT64_MAX) out.push_back(e.path());
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) { return version_of(a) > version_of(b); });
  return out;
}

Result<fs::path> save_checkpoint(const LearnerCore& core, const fs::path& dir, int keep) {
  RLX_REQUIRE(core.batch_size() == 0, core.batch_size());
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path dst = dir / fmt::format("ckpt-{:08d}.bin", core.trainer().version());
  auto file = AtomicFileWriter::open(dst);
  if (!file) return file.error();
  // The header's payload length and checksum go over these zeros last.
  const std::uint64_t zeros[2] = {0, 0};
  if (auto r = file->append(kMagic, 8); !r) return r.error();
  if (auto r = file->append(zeros, 16); !r) return r.error();
  Writer w;
  w.u64(core.received());
  w.u64(core.updates());
  const auto adm = core.admission().state();
  w.u64(adm.accepted);
  w.u64(adm.dropped);
  w.u64(adm.rejected);
  w.vec(adm.histogram);
  const auto stats = core.stats().state();
  w.u64(stats.env_steps);
  w.u64(stats.episodes);
  w.u64(stats.episodes_lost);
  w.vec(stats.returns);
  // The trainer's state (parameters and optimizer moments: most of the
  // file) streams from the trainer into the file, its length over a
  // placeholder once it is through: held whole nowhere in memory.
  const auto at = file->size() + w.out.size();
  w.u64(0);
  if (auto r = file->append(w.out.data(), w.out.size()); !r) return r.error();
  Result<void> streamed;
  std::uint64_t state_bytes = 0;
  try {
    core.trainer().write_state([&](const void* p, std::size_t n) -> std::size_t {
      if (streamed) streamed = file->append(p, n);
      if (!streamed) return 0;
      state_bytes += n;
      return n;
    });
  } catch (const c10::Error& e) {
    if (streamed) streamed = make_error(Errc::io, dst.string() + ": " + e.what_without_backtrace());
  }
  if (!streamed) return streamed.error();
  if (auto r = file->write_at(at, &state_bytes, 8); !r) return r.error();
  Writer tail;
  // Appended later: segments received per explorer (older files end above).
  std::vector<std::uint32_t> ids;
  std::vector<std::uint64_t> counts;
  for (const auto& [id, n] : core.by_explorer()) {
    ids.push_back(id);
    counts.push_back(n);
  }
  tail.vec(ids);
  tail.vec(counts);
  // Appended later still: infrastructure failures (older files end above).
  tail.u64(stats.failures.reward_retries);
  tail.u64(stats.failures.rows_masked);
  tail.vec(stats.failures.by_code);
  // Appended later still: where the explorers' and scorers' time went.
  tail.f64(stats.work.decode_s);
  tail.f64(stats.work.tool_s);
  tail.f64(stats.work.score_s);
  tail.u64(stats.work.tool_calls);
  tail.u64(stats.policy_tokens);
  if (auto r = file->append(tail.out.data(), tail.out.size()); !r) return r.error();
  // The payload's checksum, read back from the file a piece at a time.
  const std::uint64_t length = file->size() - 24;
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> hash(XXH64_createState(), &XXH64_freeState);
  XXH64_reset(hash.get(), 0);
  std::vector<std::uint8_t> piece(std::size_t{4} << 20);
  for (std::uint64_t from = 24; from < file->size(); from += piece.size()) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), file->size() - from));
    if (auto r = file->read_at(from, piece.data(), n); !r) return r.error();
    XXH64_update(hash.get(), piece.data(), n);
  }
  const std::uint64_t header[2] = {length, XXH64_digest(hash.get())};
  if (auto r = file->write_at(8, header, 16); !r) return r.error();
  if (auto r = file->commit(); !r) return r.error();
  auto all = list_checkpoints(dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(1, keep)); i < all.size(); ++i) fs::remove(all[i], ec);
  return dst;
}

namespace {

// Everything a checkpoint file holds, checked (header, length, checksum, layout).
struct CheckpointContents {
  std::shared_ptr<MappedFile> file;    // what `trainer` points into
  std::uint64_t received = 0, updates = 0;
  Admission::State admission;
  RunStats::State stats;
  std::span<const std::uint8_t> trainer;  // Trainer::save_state's bytes, in the file
  std::map<std::uint32_t, std::uint64_t> by_explorer;
};

Result<CheckpointContents> read_checkpoint(const fs::path& path) {
  auto file = map_file(path);
  if (!file) return file.error();
  const auto raw = (*file)->bytes();
  auto bad = [&](const std::string& why) { return make_error(Errc::corrupt_record, path.string() + ": " + why); };
  if (raw.size() < 24 || std::memcmp(raw.data(), kMagic, 8) != 0) return bad("not an RLX checkpoint (or cut short)");
  std::uint64_t len = 0, sum = 0;
  std::memcpy(&len, raw.data() + 8, 8);
  std::memcpy(&sum, raw.data() + 16, 8);
  if (len != raw.size() - 24) return bad(fmt::format("{} bytes of payload, the header says {}", raw.size() - 24, len));
  const auto payload = raw.subspan(24);
  if (XXH64(payload.data(), payload.size(), 0) != sum) return bad("checksum mismatch");
  Reader r{payload};
  CheckpointContents c;
  c.file = *file;
  c.received = r.u64();
  c.updates = r.u64();
  auto& adm = c.admission;
  adm.accepted = r.u64();
  adm.dropped = r.u64();
  adm.rejected = r.u64();
  adm.histogram = r.vec<std::uint64_t>();
  auto& stats = c.stats;
  stats.env_steps = r.u64();
  stats.episodes = r.u64();
  stats.episodes_lost = r.u64();
  stats.returns = r.vec<float>();
  c.trainer = r.raw(1);
  if (r.ok && r.at != payload.size()) {
    const auto ids = r.vec<std::uint32_t>();
    const auto counts = r.vec<std::uint64_t>();
    if (ids.size() != counts.size()) return bad("malformed per-explorer counts");
    for (std::size_t i = 0; i < ids.size(); ++i) c.by_explorer[ids[i]] = counts[i];
  }
  if (r.ok && r.at != payload.size()) {
    stats.failures.reward_retries = r.u64();
    stats.failures.rows_masked = r.u64();
    stats.failures.by_code = r.vec<std::uint64_t>();
    if (stats.failures.by_code.size() > kInfraFailureCodes) return bad("malformed infrastructure failure counts");
  }
  if (r.ok && r.at != payload.size()) {
    stats.work.decode_s = r.f64();
    stats.work.tool_s = r.f64();
    stats.work.score_s = r.f64();
    stats.work.tool_calls = r.u64();
    stats.policy_tokens = r.u64();
  }
  if (!r.ok || r.at != payload.size()) return bad("malformed payload");
  return c;
}

}  // namespace

bool is_checkpoint_file(const fs::path& file) { return version_of(file) != UINT64_MAX; }

Result<LoadedCheckpoint> load_checkpoint(const fs::path& path, const LearnerCoreOptions& options) {
  auto c = read_checkpoint(path);
  if (!c) return c.error();
  auto bad = [&](const std::string& why) { return make_error(Errc::corrupt_record, path.string() + ": " + why); };
  auto core = std::make_shared<LearnerCore>(options);
  auto loaded = core->trainer().load_state(c->trainer);
  if (!loaded) return bad(loaded.error().message);
  if (!core->restore(c->received, c->updates, c->admission, c->stats))
    return bad("its staleness histogram does not fit max_staleness " + std::to_string(options.max_staleness));
  core->restore_by_explorer(std::move(c->by_explorer));
  return LoadedCheckpoint{core, path};
}

Result<std::vector<std::uint8_t>> checkpoint_trainer_state(const fs::path& file) {
  auto c = read_checkpoint(file);
  if (!c) return c.error();
  return std::vector<std::uint8_t>(c->trainer.begin(), c->trainer.end());
}

}  // namespace rlx
