// Moving bytes between "nodes" inside one benchmark process: raw loopback
// TCP (the baseline), CAF's middleman (with or without the head's front
// door) and the bulk channel. Each node is its own actor system with its
// own middleman and TCP connections (docs/BENCHMARKS.md "Across nodes").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "core/config.hpp"
#include "messages/caf_wire.hpp"

namespace rlx {

// One node: an actor system with a middleman, 2 scheduler threads.
struct BenchNode {
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<caf::actor> actors;  // exited before the system goes (its destructor waits for them)
  explicit BenchNode(const ClusterConfig& c);
  ~BenchNode();
};

// `total` bytes in `size`-byte messages (8-byte length prefix) over one
// loopback connection; bytes/s.
double raw_tcp_bytes_per_s(std::size_t size, std::size_t total);
// `count` messages of `size` bytes from one node to an actor on another,
// `window` unacknowledged; bytes/s. With `door`, through a front door in
// front of the receiver's port, as member nodes reach the head.
double caf_bytes_per_s(const ClusterConfig& c, std::size_t size, std::size_t count, int window, bool door = false);
// One node fetching a whole set of `params` floats over the bulk channel in
// chunks of `chunk_bytes` (client and server threads in this process); the
// median bytes/s of `rounds` fetches after a warm-up.
double bulk_bytes_per_s(std::size_t params, std::uint64_t chunk_bytes, int rounds);

// A weight set of `params` floats (0.25 each), encoded.
WireMsg weight_set(std::uint64_t version, std::size_t params);
extern const std::string kBenchSecret;  // the bench clusters' shared secret

}  // namespace rlx
