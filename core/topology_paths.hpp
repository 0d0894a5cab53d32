// The files and folders a topology names, under one rule (docs/topology.md
// "Paths"): a relative path is from the topology file's folder (the
// working directory for the embedded cluster.toml), made absolute when the
// file is loaded, so every node, every rank process and the rollout log's
// copy of the config name the same files whatever folder rlx started in.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace rlx {

// What a path key names, for the check made before a run starts.
enum class PathUse : std::uint8_t {
  input_file,    // must exist and be readable (tokenizer, token_file, TLS files)
  start,         // [policy] init: a weights file, a run's log_dir, or "hf:DIR" (a folder with config.json)
  folder,        // must exist ([external] cwd)
  output_folder  // made if missing (log_dir): its place must be creatable
};

struct TopologyPath {
  std::string key;      // "policy.init"
  std::string* value;   // into the config
  PathUse use;
};

// Every path key of `config`, in the order of docs/topology.md.
std::vector<TopologyPath> topology_paths(ClusterConfig& config);

// The names of those keys (docs and tests).
std::vector<std::string> topology_path_keys();

// Makes every relative path of `config` absolute from `folder`; an `exec:`
// environment with no [external] cwd runs in `folder`.
void resolve_topology_paths(ClusterConfig& config, const std::filesystem::path& folder);

// Each file or folder the topology reads is there and readable, and
// log_dir can be made: else an error naming the key, the path and what is
// wrong (a command stops on it with exit 2 before it starts anything).
// `keys`: only these (a command that reads a few of them, as rlx sft);
// empty: every one.
Result<void> check_topology_paths(ClusterConfig config, const std::vector<std::string>& keys = {});

}  // namespace rlx
