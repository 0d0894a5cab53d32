// `rlx scale`: asks a running cluster's head (through its gate, proving
// the cluster secret) for a number of explorers and reward workers, and
// prints what the coordinator changed.
#pragma once

#include <cstdint>
#include <string>

namespace rlx {

struct ScaleArgs {
  std::string head;             // HOST:PORT of the head's gate
  std::string config;           // connection settings ([tls], [launch]); empty: the embedded cluster.toml
  std::string secret_file;
  std::int32_t explorers = -1;  // -1: unchanged
  std::int32_t rewards = -1;
};

// 0 done, 2 refused or bad input, 4 the head did not answer.
int scale_command(const ScaleArgs& args);

}  // namespace rlx
