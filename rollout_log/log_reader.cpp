#include "rollout_log/log_reader.hpp"

#include <algorithm>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "messages/stream_frame.hpp"

namespace rlx {

namespace fs = std::filesystem;

std::string describe(const LogProblem& p) {
  return fmt::format("{} at byte {}: {}", p.where.file, p.where.offset, p.what);
}

namespace {

// The index of one data file, or nothing (missing); a damaged index keeps
// the entries before the damage and says so in `problem`.
std::optional<std::vector<IndexEntryData>> load_index(const fs::path& path, std::string& problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<std::uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<IndexEntryData> out;
  std::uint64_t pos = 0;
  while (pos < raw.size()) {
    auto n = framed_size(raw.data(), raw.size(), pos, 1 << 16);
    if (!n) {
      problem = fmt::format("index {} damaged at byte {}: {}; using its first {} entries", path.string(), pos,
                            n.error().message, out.size());
      break;
    }
    auto e = decode_index_entry(WireBuffer::copy_of(raw.data() + pos, *n));
    if (!e) {
      problem = fmt::format("index {} damaged at byte {}: {}; using its first {} entries", path.string(), pos,
                            e.error().message, out.size());
      break;
    }
    out.push_back(*e);
    pos += *n;
  }
  return out;
}

class FileReader {
 public:
  FileReader(const ReadOptions& options, const LogVisitor& visit, ReadReport& report)
      : options_(options), visit_(visit), report_(report) {}

  // False when reading must end (a fatal problem without skip_bad, or the
  // visitor stopped); `fatal` then holds the problem, if any.
  bool read(const logfiles::DataFile& f, std::optional<LogProblem>& fatal) {
    const std::string name = f.path.string();
    std::string zproblem, iproblem;
    auto bytes = logfiles::read_all(f, &zproblem);
    if (!bytes) return fail({{name, 0}, bytes.error().message, true}, fatal);
    std::error_code ec;
    report_.stored_bytes += fs::file_size(f.path, ec);
    report_.bytes += bytes->size();
    auto index = load_index(f.index_path, iproblem);
    if (!index)
      report_.problems.push_back(
          {{name, 0}, "index " + f.index_path.filename().string() + " missing: the data file was scanned instead", false});
    else if (!iproblem.empty())
      report_.problems.push_back({{name, 0}, iproblem, false});
    const std::uint8_t* data = bytes->data();
    const std::uint64_t size = bytes->size();
    std::uint64_t pos = 0;
    std::vector<std::uint64_t> bad_offsets;  // reported already: not again by the index check
    while (pos < size) {
      auto n = framed_size(data, size, pos, options_.decode.max_bytes);
      Result<LogEntryData> entry = n ? decode_log_entry(WireBuffer::copy_of(data + pos, *n), options_.with_segments,
                                                        options_.decode)
                                     : Result<LogEntryData>(n.error());
      if (!entry) {
        // A record that runs past the end of the file is the last one.
        const bool last = n ? pos + *n >= size : n.error().code == Errc::truncated_message;
        bad_offsets.push_back(pos);
        std::string what = entry.error().message;
        if (!n && n.error().code == Errc::truncated_message) what = "truncated record: " + what;
        if (!fail({{name, pos}, std::string(to_string(entry.error().code)) + ": " + what, true}, fatal)) return false;
        pos = resync(index, pos, size, name, last);
        continue;
      }
      if (entry->seq != report_.next_seq) {
        const bool gap = entry->seq > report_.next_seq;
        std::string what = gap ? fmt::format("records seq {}..{} are missing", report_.next_seq, entry->seq - 1)
                               : fmt::format("seq {} repeats (expected {})", entry->seq, report_.next_seq);
        if (!fail({{name, pos}, what, true}, fatal)) return false;
        if (!gap) {
          pos += *n;
          continue;
        }
      }
      report_.next_seq = entry->seq + 1;
      ++report_.entries;
      if (!visit_(*entry, LogPosition{name, pos})) {
        report_.stopped = true;
        return false;
      }
      pos += *n;
    }
    if (!zproblem.empty() && !fail({{name, size}, zproblem, true}, fatal)) return false;
    if (index) {
      std::uint64_t beyond = 0, last_seq = 0;
      for (const auto& e : *index)
        if (e.seq >= report_.next_seq && std::find(bad_offsets.begin(), bad_offsets.end(), e.offset) == bad_offsets.end())
          ++beyond, last_seq = e.seq;
      if (beyond && !fail({{name, size}, fmt::format("the file ends here but its index lists {} more records "
                                                     "(up to seq {}): the file was cut short",
                                                     beyond, last_seq),
                           true},
                          fatal))
        return false;
    }
    return true;
  }

 private:
  // Records the problem; false when reading must stop.
  bool fail(LogProblem p, std::optional<LogProblem>& fatal) {
    report_.problems.push_back(p);
    if (options_.skip_bad) return true;
    fatal = std::move(p);
    return false;
  }

  // Where to go on after a bad record at `pos`: the next record the index
  // knows, else the end of the file.
  std::uint64_t resync(const std::optional<std::vector<IndexEntryData>>& index, std::uint64_t pos, std::uint64_t size,
                       const std::string& name, bool last) {
    if (index)
      for (const auto& e : *index)
        if (e.offset > pos && e.offset < size) return e.offset;
    if (!last)
      report_.problems.push_back(
          {{name, pos}, fmt::format("skipped {} bytes to the end of the file (no index entry to resume at)", size - pos),
           false});
    return size;
  }

  const ReadOptions& options_;
  const LogVisitor& visit_;
  ReadReport& report_;
};

}  // namespace

Result<ReadReport> read_log(const fs::path& where, const ReadOptions& options, const LogVisitor& visit) {
  const fs::path dir = logfiles::rollouts_dir(where);
  auto files = logfiles::list(dir);
  if (!files) return files.error();
  if (files->empty()) return make_error(Errc::not_found, dir.string() + ": no rollouts-*.capnp files");
  ReadReport report;
  FileReader reader(options, visit, report);
  for (const auto& f : *files) {
    ++report.files;
    std::optional<LogProblem> fatal;
    if (!reader.read(f, fatal)) {
      if (fatal) return make_error(Errc::corrupt_record, describe(*fatal));
      break;  // the visitor stopped
    }
  }
  return report;
}

std::optional<std::uint64_t> indexed_records(const fs::path& where) {
  auto files = logfiles::list(logfiles::rollouts_dir(where));
  if (!files) return std::nullopt;
  std::uint64_t n = 0;
  for (const auto& f : *files) {
    std::string problem;
    auto index = load_index(f.index_path, problem);
    if (!index) return std::nullopt;
    n += index->size();
  }
  return n;
}

}  // namespace rlx
