#include "rollout_log/log_writer.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <unistd.h>

#include "rollout_log/log_reader.hpp"

namespace rlx {

namespace fs = std::filesystem;

namespace {

Error io_error(const fs::path& p, const std::string& what) {
  return make_error(Errc::io, fmt::format("{}: {}: {}", p.string(), what, std::strerror(errno)));
}

bool write_all(std::FILE* f, std::span<const std::byte> bytes) {
  return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0;
}

}  // namespace

Result<std::unique_ptr<LogWriter>> LogWriter::create(const LogWriterOptions& options) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return make_error(Errc::io, options.dir.string() + ": " + ec.message());
  auto existing = logfiles::list(options.dir);
  if (!existing) return existing.error();
  if (!existing->empty())
    return make_error(Errc::io, fmt::format("{} already holds a rollout log ({} files): resume it (--resume) or "
                                            "choose another log_dir",
                                            options.dir.string(), existing->size()));
  std::unique_ptr<LogWriter> w(new LogWriter(options));
  auto opened = w->open_file(0);
  if (!opened) return opened.error();
  return w;
}

Result<std::unique_ptr<LogWriter>> LogWriter::resume(const LogWriterOptions& options, std::string* repaired) {
  auto files = logfiles::list(options.dir);
  if (!files) return files.error();
  if (files->empty()) return create(options);
  // Read it all (checksums, continuity) without unpacking segments; the
  // only damage a crash can leave is a torn record at the very end.
  ReadOptions ro;
  ro.skip_bad = true;
  ro.with_segments = false;
  std::vector<IndexEntryData> last_entries;
  const std::string last_name = files->back().path.string();
  auto report = read_log(options.dir, ro, [&](const LogEntryData& e, const LogPosition& at) {
    if (at.file == last_name) last_entries.push_back({e.seq, at.offset, 0, e.checksum, e.kind});
    return true;
  });
  if (!report) return report.error();
  const auto& last = files->back();
  std::uint64_t cut = 0;
  bool torn = false;
  for (const auto& p : report->problems) {
    if (!p.fatal) continue;
    const bool tail = p.where.file == last_name && !last.compressed &&
                      p.what.find("truncated record") != std::string::npos;
    if (!tail) return make_error(Errc::corrupt_record, "cannot resume a damaged log: " + describe(p));
    torn = true;
    cut = p.where.offset;
  }
  if (torn) {
    std::error_code ec;
    const auto size = fs::file_size(last.path, ec);
    fs::resize_file(last.path, cut, ec);
    if (ec) return make_error(Errc::io, last_name + ": cannot cut the torn record: " + ec.message());
    if (repaired) *repaired = fmt::format("{}: cut a torn last record ({} bytes at byte {})", last_name, size - cut, cut);
  }
  if (!last.compressed) {
    // Rebuild the last file's index from what was read (it may lag the data).
    std::FILE* idx = std::fopen(last.index_path.c_str(), "wb");
    if (!idx) return io_error(last.index_path, "cannot rewrite");
    for (std::size_t i = 0; i < last_entries.size(); ++i) {
      auto& e = last_entries[i];
      const std::uint64_t end = i + 1 < last_entries.size() ? last_entries[i + 1].offset : (torn ? cut : fs::file_size(last.path));
      e.bytes = end - e.offset;
      if (!write_all(idx, encode_index_entry(e).bytes())) {
        std::fclose(idx);
        return io_error(last.index_path, "write failed");
      }
    }
    std::fclose(idx);
    if (options.compress) {
      auto c = logfiles::compress_file(last.path, options.compress_level);
      if (!c) return c.error();
    }
  }
  std::unique_ptr<LogWriter> w(new LogWriter(options));
  w->next_seq_ = report->next_seq;
  auto opened = w->open_file(last.number + 1);
  if (!opened) return opened.error();
  return w;
}

LogWriter::~LogWriter() { (void)close(); }

Result<void> LogWriter::open_file(std::uint64_t number) {
  file_number_ = number;
  file_bytes_ = 0;
  index_bytes_ = 0;
  const auto data = logfiles::data_path(options_.dir, number), index = logfiles::index_path(options_.dir, number);
  data_ = std::fopen(data.c_str(), "wbx");  // never overwrite a file of the log
  if (!data_) return io_error(data, "cannot create");
  index_ = std::fopen(index.c_str(), "wb");
  if (!index_) return io_error(index, "cannot create");
  return {};
}

Result<void> LogWriter::close() {
  if (!data_) return {};
  const bool ok = std::fflush(data_) == 0 && ::fsync(fileno(data_)) == 0;
  std::fclose(data_);
  std::fclose(index_);
  data_ = index_ = nullptr;
  const auto path = logfiles::data_path(options_.dir, file_number_);
  if (!ok) return io_error(path, "flush failed");
  if (options_.compress) return logfiles::compress_file(path, options_.compress_level);
  return {};
}

bool LogWriter::write(std::FILE* f, std::span<const std::byte> bytes) {
  if (total_io_ + bytes.size() > options_.fail_after_bytes) {  // injected: a disk that fills here
    const auto room = options_.fail_after_bytes > total_io_ ? options_.fail_after_bytes - total_io_ : 0;
    if (room > 0) write_all(f, bytes.first(room));
    total_io_ += room;
    errno = ENOSPC;
    return false;
  }
  total_io_ += bytes.size();
  return write_all(f, bytes);
}

Result<void> LogWriter::fail(const std::filesystem::path& file, const std::string& what) {
  const int err = errno;
  // Cut both files back to the last whole entry: the log stays readable.
  std::fflush(data_);
  std::fflush(index_);
  const bool cut = ::ftruncate(fileno(data_), static_cast<off_t>(file_bytes_)) == 0 &&
                   ::ftruncate(fileno(index_), static_cast<off_t>(index_bytes_)) == 0;
  std::fseek(data_, 0, SEEK_END);
  std::fseek(index_, 0, SEEK_END);
  failure_ = make_error(Errc::io, fmt::format("{}: {} ({}){}", file.string(), what, std::strerror(err),
                                              cut ? "" : "; the file could not be cut back to its last whole entry"));
  return *failure_;
}

Result<void> LogWriter::append(const EncodedEntry& e, LogKind kind) {
  const std::uint64_t size = e.buf.size();
  if (failure_) return make_error(Errc::io, fmt::format("nothing is written after entry {}: {}", next_seq_, failure_->message));
  if (!data_) return make_error(Errc::io, "the log is closed");
  if (file_bytes_ > 0 && file_bytes_ + size > options_.file_bytes) {
    auto closed = close();
    if (!closed) return closed;
    auto opened = open_file(file_number_ + 1);
    if (!opened) return opened;
  }
  const auto data_file = logfiles::data_path(options_.dir, file_number_);
  if (!write(data_, e.buf.bytes())) return fail(data_file, "write failed");
  const IndexEntryData ie{next_seq_, file_bytes_, size, e.checksum, kind};
  const auto index_entry = encode_index_entry(ie);
  if (!write(index_, index_entry.bytes())) return fail(logfiles::index_path(options_.dir, file_number_), "write failed");
  index_bytes_ += index_entry.size();
  file_bytes_ += size;
  bytes_ += size;
  ++written_;
  ++next_seq_;
  return {};
}

Result<void> LogWriter::write_start(const RunStartData& x) { return append(encode_log_start(next_seq_, x), LogKind::start); }

Result<void> LogWriter::write_rollout(const RolloutRecordData& x, const WireBuffer& segment_envelope) {
  return append(encode_log_rollout(next_seq_, x, segment_envelope), LogKind::rollout);
}

Result<void> LogWriter::write_weights(const WeightVersionData& x) {
  return append(encode_log_weights(next_seq_, x), LogKind::weights);
}

Result<void> LogWriter::write_failed_update(const FailedUpdateData& x) {
  return append(encode_log_failed_update(next_seq_, x), LogKind::failed_update);
}

}  // namespace rlx
