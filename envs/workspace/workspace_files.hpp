// An episode's private copy of a workspace (envs/workspace): the project's
// files in memory, changed only through the agent's tools and bounded in
// number and size, so no tool call can fill a disk or reach outside it.
// For a test run the copy is written to a fresh directory that the sandbox
// binds read-only, and removed afterwards. CAF-free.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "envs/workspace/workspace_task.hpp"

namespace rlx {

struct WorkspaceLimits {
  std::size_t max_files = 64;
  std::size_t max_file_bytes = 32 * 1024;
  std::size_t max_total_bytes = 256 * 1024;
};

// Why `path` is not a workspace path ("" when it is): relative, made of
// [A-Za-z0-9_.-] names joined by '/', no "." or ".." name, no name starting
// with '.', at most 4 deep and 128 bytes.
std::string bad_workspace_path(std::string_view path);

class WorkspaceFiles {
 public:
  explicit WorkspaceFiles(const std::vector<WorkspaceFile>& files, WorkspaceLimits limits = {});

  // The file's text, or nullptr when there is none.
  const std::string* find(const std::string& path) const;
  // Creates or replaces a file; refused (a message for the agent) for a bad
  // path or past a limit, with nothing changed.
  Result<void> write(const std::string& path, std::string text);
  std::vector<std::string> paths() const;  // sorted
  std::size_t total_bytes() const { return total_; }
  const WorkspaceLimits& limits() const { return limits_; }

  // Every file written under `dir` (which exists and is empty), readable by
  // any user (the sandbox may run as a uid of its own).
  Result<void> materialise(const std::filesystem::path& dir) const;

  // The files that differ from `original` or are new, sorted by path.
  std::vector<WorkspaceFile> changed_from(const std::vector<WorkspaceFile>& original) const;

 private:
  std::map<std::string, std::string> files_;
  WorkspaceLimits limits_;
  std::size_t total_ = 0;
};

// A fresh private directory under the system's temp directory, removed
// with everything in it when this goes.
class ScratchDir {
 public:
  static Result<ScratchDir> make(const std::string& prefix);
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

// Changed files as one payload (a reward request's): per file its path, a
// newline, its size in decimal, a newline and its bytes. decode refuses
// anything else: a bad path, a size past `limits`, trailing bytes.
std::string encode_changes(const std::vector<WorkspaceFile>& files);
Result<std::vector<WorkspaceFile>> decode_changes(std::string_view payload, const WorkspaceLimits& limits = {});

}  // namespace rlx
