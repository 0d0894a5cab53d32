#include "envs/workspace/workspace_files.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <sys/stat.h>

namespace rlx {

namespace fs = std::filesystem;

std::string bad_workspace_path(std::string_view path) {
  if (path.empty()) return "no path given";
  if (path.size() > 128) return "a path is at most 128 characters";
  if (path.front() == '/') return "paths are relative to the project (no leading '/')";
  int depth = 0;
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto end = std::min(path.find('/', start), path.size());
    const std::string_view name = path.substr(start, end - start);
    if (name.empty()) return "a path has no empty part ('//' or a trailing '/')";
    if (name == "." || name == "..") return "a path has no '.' or '..' part";
    if (name.front() == '.') return "no file or folder name starts with '.'";
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        return fmt::format("a path is made of letters, digits and _ - . / (not '{}')",
                           std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c)));
    if (++depth > 4) return "a path is at most 4 deep";
    start = end + 1;
  }
  return "";
}

WorkspaceFiles::WorkspaceFiles(const std::vector<WorkspaceFile>& files, WorkspaceLimits limits) : limits_(limits) {
  for (const auto& f : files) {
    total_ += f.text.size();
    files_[f.path] = f.text;
  }
}

const std::string* WorkspaceFiles::find(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

Result<void> WorkspaceFiles::write(const std::string& path, std::string text) {
  if (auto why = bad_workspace_path(path); !why.empty()) return make_error(Errc::invalid_field, why);
  // A folder and a file cannot share a name.
  for (const auto& [p, _] : files_) {
    if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 && p[path.size()] == '/')
      return make_error(Errc::invalid_field, path + " is a folder");
    if (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '/')
      return make_error(Errc::invalid_field, p + " is a file, not a folder");
  }
  if (text.size() > limits_.max_file_bytes)
    return make_error(Errc::invalid_field, fmt::format("a file holds at most {} bytes (this one: {})", limits_.max_file_bytes, text.size()));
  auto it = files_.find(path);
  const std::size_t old = it == files_.end() ? 0 : it->second.size();
  if (it == files_.end() && files_.size() >= limits_.max_files)
    return make_error(Errc::invalid_field, fmt::format("the project holds at most {} files", limits_.max_files));
  if (total_ - old + text.size() > limits_.max_total_bytes)
    return make_error(Errc::invalid_field, fmt::format("the project holds at most {} bytes in all", limits_.max_total_bytes));
  total_ = total_ - old + text.size();
  files_[path] = std::move(text);
  return {};
}

std::vector<std::string> WorkspaceFiles::paths() const {
  std::vector<std::string> out;
  for (const auto& [p, _] : files_) out.push_back(p);
  return out;
}

Result<void> WorkspaceFiles::materialise(const fs::path& dir) const {
  for (const auto& [p, text] : files_) {
    const fs::path to = dir / p;
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    if (ec) return make_error(Errc::io, "cannot make " + to.parent_path().string() + ": " + ec.message());
    for (fs::path d = to.parent_path(); d != dir && d.has_relative_path(); d = d.parent_path()) chmod(d.c_str(), 0755);
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return make_error(Errc::io, "cannot write " + to.string() + ": " + std::strerror(errno));
    chmod(to.c_str(), 0644);
  }
  return {};
}

std::vector<WorkspaceFile> WorkspaceFiles::changed_from(const std::vector<WorkspaceFile>& original) const {
  std::map<std::string, const std::string*> before;
  for (const auto& f : original) before[f.path] = &f.text;
  std::vector<WorkspaceFile> out;
  for (const auto& [p, text] : files_) {
    auto it = before.find(p);
    if (it == before.end() || *it->second != text) out.push_back({p, text});
  }
  return out;
}

Result<ScratchDir> ScratchDir::make(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) return make_error(Errc::io, std::string("mkdtemp: ") + std::strerror(errno));
  chmod(tmpl.c_str(), 0755);  // the sandbox's own uid reads through it
  return ScratchDir(tmpl);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::string encode_changes(const std::vector<WorkspaceFile>& files) {
  std::string out;
  for (const auto& f : files) out += f.path + "\n" + std::to_string(f.text.size()) + "\n" + f.text;
  return out;
}

Result<std::vector<WorkspaceFile>> decode_changes(std::string_view payload, const WorkspaceLimits& limits) {
  std::vector<WorkspaceFile> out;
  std::size_t total = 0;
  while (!payload.empty()) {
    const auto nl = payload.find('\n');
    if (nl == std::string_view::npos) return make_error(Errc::malformed_message, "changes: a path without its size");
    std::string path(payload.substr(0, nl));
    if (auto why = bad_workspace_path(path); !why.empty()) return make_error(Errc::malformed_message, "changes: " + why);
    payload.remove_prefix(nl + 1);
    const auto nl2 = payload.find('\n');
    if (nl2 == std::string_view::npos || nl2 == 0 || nl2 > 9) return make_error(Errc::malformed_message, "changes: no size after " + path);
    std::size_t size = 0;
    for (char c : payload.substr(0, nl2)) {
      if (c < '0' || c > '9') return make_error(Errc::malformed_message, "changes: a size is decimal digits");
      size = size * 10 + static_cast<std::size_t>(c - '0');
    }
    payload.remove_prefix(nl2 + 1);
    if (size > limits.max_file_bytes || size > payload.size())
      return make_error(Errc::malformed_message, fmt::format("changes: {} claims {} bytes", path, size));
    total += size;
    if (out.size() >= limits.max_files || total > limits.max_total_bytes)
      return make_error(Errc::malformed_message, "changes: more than a workspace holds");
    for (const auto& f : out)
      if (f.path == path) return make_error(Errc::malformed_message, "changes: " + path + " twice");
    out.push_back({std::move(path), std::string(payload.substr(0, size))});
    payload.remove_prefix(size);
  }
  return out;
}

}  // namespace rlx
