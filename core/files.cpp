#include "core/files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace rlx {

namespace fs = std::filesystem;

Result<void> write_file_atomically(const fs::path& path, std::span<const std::uint8_t> bytes, unsigned mode) {
  const fs::path tmp = path.string() + ".tmp";
  auto fail = [&](const char* what) {
    return make_error(Errc::io, tmp.string() + ": " + what + ": " + std::strerror(errno));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, static_cast<mode_t>(mode));
  if (fd >= 0) ::fchmod(fd, static_cast<mode_t>(mode));  // an old .tmp keeps its mode through O_CREAT
  if (fd < 0) return fail("cannot create");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      ::close(fd);
      return fail("write failed");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("fsync failed");
  }
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return make_error(Errc::io, tmp.string() + ": rename: " + ec.message());
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {
    ::fsync(dfd);  // the rename itself survives a crash
    ::close(dfd);
  }
  return {};
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
