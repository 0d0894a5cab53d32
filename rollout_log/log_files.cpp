#include "rollout_log/log_files.hpp"

#include "core/files.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <zstd.h>

namespace rlx::logfiles {

namespace {

constexpr const char* kPrefix = "rollouts-";

// "rollouts-000012.capnp[.zst]" -> 12
bool parse_name(const std::string& name, std::uint64_t& number, bool& compressed) {
  if (name.rfind(kPrefix, 0) != 0) return false;
  const std::string rest = name.substr(std::strlen(kPrefix));
  const auto dot = rest.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string digits = rest.substr(0, dot), ext = rest.substr(dot);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  if (ext != ".capnp" && ext != ".capnp.zst") return false;
  number = std::stoull(digits);
  compressed = ext == ".capnp.zst";
  return true;
}

Error io_error(const fs::path& p, const std::string& what) {
  return make_error(Errc::io, fmt::format("{}: {}: {}", p.string(), what, std::strerror(errno)));
}

}  // namespace

fs::path data_path(const fs::path& dir, std::uint64_t number) {
  return dir / fmt::format("{}{:06d}.capnp", kPrefix, number);
}

fs::path index_path(const fs::path& dir, std::uint64_t number) {
  return dir / fmt::format("{}{:06d}.idx", kPrefix, number);
}

fs::path rollouts_dir(const fs::path& where) {
  std::error_code ec;
  if (fs::is_directory(where / "rollouts", ec)) return where / "rollouts";
  return where;
}

Result<std::vector<DataFile>> list(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(Errc::not_found, dir.string() + ": no rollout log here");
  std::vector<DataFile> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::uint64_t n = 0;
    bool z = false;
    if (!e.is_regular_file() || !parse_name(e.path().filename().string(), n, z)) continue;
    auto same = std::find_if(files.begin(), files.end(), [&](const DataFile& f) { return f.number == n; });
    if (same != files.end()) {
      if (z) *same = DataFile{n, e.path(), true, index_path(dir, n)};
      continue;
    }
    files.push_back(DataFile{n, e.path(), z, index_path(dir, n)});
  }
  if (ec) return make_error(Errc::io, dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end(), [](const DataFile& a, const DataFile& b) { return a.number < b.number; });
  return files;
}

Result<std::vector<std::uint8_t>> read_all(const DataFile& f, std::string* problem) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in) return io_error(f.path, "cannot open");
  std::vector<std::uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!f.compressed) return raw;
  std::vector<std::uint8_t> out;
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_inBuffer input{raw.data(), raw.size(), 0};
  std::vector<std::uint8_t> chunk(ZSTD_DStreamOutSize());
  std::size_t last = 1;
  while (input.pos < input.size) {
    ZSTD_outBuffer output{chunk.data(), chunk.size(), 0};
    last = ZSTD_decompressStream(ctx.get(), &output, &input);
    if (ZSTD_isError(last)) {
      if (problem) *problem = fmt::format("zstd: {} (compressed byte {})", ZSTD_getErrorName(last), input.pos);
      out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(output.pos));
      return out;
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(output.pos));
  }
  // Flush what the decoder still holds (a frame ends with last == 0).
  while (last != 0) {
    ZSTD_outBuffer output{chunk.data(), chunk.size(), 0};
    last = ZSTD_decompressStream(ctx.get(), &output, &input);
    if (ZSTD_isError(last) || output.pos == 0) {
      if (problem) *problem = "zstd: the compressed file ends mid-frame (truncated)";
      break;
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(output.pos));
  }
  return out;
}

Result<void> compress_file(const fs::path& path, int level) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path, "cannot open");
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<char> packed(ZSTD_compressBound(raw.size()));
  const std::size_t n = ZSTD_compress(packed.data(), packed.size(), raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) return make_error(Errc::io, path.string() + ": zstd: " + ZSTD_getErrorName(n));
  auto written = write_file_atomically(path.string() + ".zst",
                                       std::span(reinterpret_cast<const std::uint8_t*>(packed.data()), n));
  if (!written) return written.error();
  std::error_code ec;
  fs::remove(path, ec);
  return {};
}

}  // namespace rlx::logfiles
