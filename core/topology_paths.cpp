#include "core/topology_paths.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rlx {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kHf = "hf:";
constexpr std::string_view kPeft = "peft:";

// The file-system part of a value ("hf:DIR" and "peft:DIR" name DIR).
std::string& strip(std::string& value, std::string& prefix) {
  prefix = value.starts_with(kHf) ? std::string(kHf) : value.starts_with(kPeft) ? std::string(kPeft) : std::string();
  if (!prefix.empty()) value.erase(0, prefix.size());
  return value;
}

// Why `path` cannot be opened for reading, or "".
std::string unreadable(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  return "";
}

std::string what_is_wrong(const std::string& value, PathUse use) {
  std::error_code ec;
  const bool hf = value.starts_with(kHf), peft = value.starts_with(kPeft);
  const fs::path path = hf ? value.substr(kHf.size()) : peft ? value.substr(kPeft.size()) : value;
  const auto status = fs::status(path, ec);
  const bool exists = fs::exists(status);
  switch (use) {
    case PathUse::input_file:
      if (!exists) return "no such file";
      if (fs::is_directory(status)) return "a folder, not a file";
      return unreadable(path);
    case PathUse::start:
      if (!exists) return hf || peft ? "no such folder" : "no such file or folder";
      if (peft) {
        if (!fs::exists(path / "adapter_config.json", ec)) return "no adapter_config.json in it (not a PEFT adapter)";
        return unreadable(path / "adapter_config.json");
      }
      if (hf) {
        if (!fs::is_directory(status)) return "not a folder (hf:DIR names a Hugging Face checkpoint's folder)";
        if (!fs::exists(path / "config.json", ec)) return "no config.json in it (not a Hugging Face checkpoint)";
        return unreadable(path / "config.json");
      }
      return fs::is_directory(status) ? "" : unreadable(path);
    case PathUse::folder:
      if (!exists) return "no such folder";
      return fs::is_directory(status) ? "" : "not a folder";
    case PathUse::output_folder: {
      if (exists) return fs::is_directory(status) ? "" : "not a folder (a file is there)";
      // The nearest folder above that exists must be a folder we can write in.
      fs::path up = path.parent_path();
      while (!up.empty() && !fs::exists(up, ec)) up = up.parent_path();
      if (up.empty()) return "";
      if (!fs::is_directory(up, ec)) return up.string() + " is a file, not a folder";
      if (::access(up.c_str(), W_OK | X_OK) != 0)
        return "cannot be made in " + up.string() + ": " + std::strerror(errno);
      return "";
    }
  }
  return "";
}

}  // namespace

std::vector<TopologyPath> topology_paths(ClusterConfig& c) {
  return {
      {"run.log_dir", &c.run.log_dir, PathUse::output_folder},
      {"policy.init", &c.policy.init, PathUse::start},
      {"policy.init_adapter", &c.policy.init_adapter, PathUse::start},
      {"tokens.tokenizer", &c.tokens.tokenizer, PathUse::input_file},
      {"external.cwd", &c.external.cwd, PathUse::folder},
      {"gateway.token_file", &c.gateway.token_file, PathUse::input_file},
      {"tls.certificate", &c.tls.certificate, PathUse::input_file},
      {"tls.key", &c.tls.key, PathUse::input_file},
      {"tls.ca", &c.tls.ca, PathUse::input_file},
  };
}

std::vector<std::string> topology_path_keys() {
  ClusterConfig c;
  std::vector<std::string> keys;
  for (const auto& p : topology_paths(c)) keys.push_back(p.key);
  return keys;
}

void resolve_topology_paths(ClusterConfig& config, const fs::path& folder) {
  const fs::path base = fs::absolute(folder);
  for (auto& p : topology_paths(config)) {
    if (p.value->empty()) continue;
    std::string prefix;
    std::string& path = strip(*p.value, prefix);
    if (fs::path(path).is_relative()) path = (base / path).lexically_normal().string();
    *p.value = prefix + path;
  }
  if (config.run.env.starts_with("exec:") && config.external.cwd.empty())
    config.external.cwd = base.lexically_normal().string();
}

Result<void> check_topology_paths(ClusterConfig config, const std::vector<std::string>& keys) {
  for (const auto& p : topology_paths(config)) {
    if (p.value->empty() || (!keys.empty() && !std::ranges::count(keys, p.key))) continue;
    if (auto why = what_is_wrong(*p.value, p.use); !why.empty())
      return make_error(p.use == PathUse::output_folder ? Errc::io : Errc::config_missing,
                        p.key + " = \"" + *p.value + "\": " + why + " (" + config.source +
                            "; a relative path is from " +
                            (config.source.starts_with("<") ? "the working directory" : "the topology file's folder") +
                            ": docs/topology.md \"Paths\")");
  }
  return {};
}

}  // namespace rlx
