// The cluster secret and proofs of it. A node proves it knows the secret
// by answering the head's one-time nonce with HMAC-SHA256(secret, nonce
// and node name); the secret itself never crosses the network and never
// lives in the TOML (docs/cluster.md).
#pragma once

#include <string>

#include "core/error.hpp"

namespace rlx {

// The secret from the environment: RLX_CLUSTER_SECRET, else the file named
// by RLX_CLUSTER_SECRET_FILE (one trailing newline dropped). `file`, when
// not empty, is read first (the --secret-file option). Fails when none is
// set, a file cannot be read, or the secret is shorter than 16 bytes.
Result<std::string> load_cluster_secret(const std::string& file = "");

// A fresh random secret (hex of 32 random bytes), for `rlx launch` when
// every node runs on this machine and none was given.
std::string random_secret();

// A one-time nonce (hex of 32 random bytes).
std::string random_nonce();

// hex(HMAC-SHA256(secret, nonce + "\n" + node)).
std::string secret_proof(const std::string& secret, const std::string& nonce, const std::string& node);

// Compares two proofs in time independent of where they differ.
bool proofs_equal(const std::string& a, const std::string& b);

}  // namespace rlx
