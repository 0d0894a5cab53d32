#include "core/files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace rlx {

namespace fs = std::filesystem;

Error AtomicFileWriter::fail(const char* what) const {
  return make_error(Errc::io, tmp_.string() + ": " + what + ": " + std::strerror(errno));
}

Result<AtomicFileWriter> AtomicFileWriter::open(const fs::path& path, unsigned mode) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC, static_cast<mode_t>(mode));
  if (fd < 0) return make_error(Errc::io, tmp.string() + ": cannot create: " + std::strerror(errno));
  ::fchmod(fd, static_cast<mode_t>(mode));  // an old .tmp keeps its mode through O_CREAT
  return AtomicFileWriter(path, tmp, fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ec;
  fs::remove(tmp_, ec);
}

Result<void> AtomicFileWriter::append(const void* data, std::size_t n) {
  if (auto r = write_at(size_, data, n); !r) return r;
  size_ += n;
  return {};
}

Result<void> AtomicFileWriter::write_at(std::uint64_t offset, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t done = 0; done < n;) {
    const ssize_t k = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (k <= 0) return fail("write failed");
    done += static_cast<std::size_t>(k);
  }
  return {};
}

Result<void> AtomicFileWriter::read_at(std::uint64_t offset, void* into, std::size_t n) const {
  auto* p = static_cast<std::uint8_t*>(into);
  for (std::size_t done = 0; done < n;) {
    const ssize_t k = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (k <= 0) return fail("read back failed");
    done += static_cast<std::size_t>(k);
  }
  return {};
}

Result<void> AtomicFileWriter::commit() {
  if (::fsync(fd_) != 0) return fail("fsync failed");
  ::close(std::exchange(fd_, -1));
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) return make_error(Errc::io, tmp_.string() + ": rename: " + ec.message());
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
  return {};
}

Result<void> write_file_atomically(const fs::path& path, std::span<const std::uint8_t> bytes, unsigned mode) {
  auto file = AtomicFileWriter::open(path, mode);
  if (!file) return file.error();
  if (auto r = file->append(bytes.data(), bytes.size()); !r) return r;
  return file->commit();
}

Result<void> write_text_atomically(const fs::path& path, const std::string& text, unsigned mode) {
  return write_file_atomically(
      path, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), mode);
}

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(Errc::io, path.string() + ": cannot read (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(Errc::io, path.string() + ": read failed");
  return ss.str();
}

}  // namespace rlx
