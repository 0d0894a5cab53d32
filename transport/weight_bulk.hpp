// The bulk channel: weight chunks between nodes over one plain TCP
// connection per node, beside CAF's middleman (which tops out near 1 GB/s,
// docs/BENCHMARKS.md). The frames are the same Envelopes as everywhere
// else, in Cap'n Proto's stream framing:
//
//   server -> client  Join   {node: server, authToken: one-time nonce}
//   client -> server  Join   {node: client, authToken: HMAC-SHA256(secret, nonce "\n" node)}
//   server -> client  Join   {node: server} (admitted) | Leave {reason} (refused, then closed)
//   client -> server  WeightRequest {version, chunked, chunk, base?}   (several in flight)
//   server -> client  WeightChunk (in request order; a delta against `base`
//                     when the server holds it and deltas are on) | Leave {reason} (e.g. not held)
//
// Every chunk keeps its own checksum and the receiver checks it on
// arrival (ChunkAssembler::add_encoded), exactly as over the middleman.
// No CAF here: the weight relay (actors/) drives a client from its own
// thread; the head runs a server over its weight store's shelf.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <kj/array.h>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/stream_frame.hpp"
#include "transport/strangers.hpp"
#include "transport/weight_shelf.hpp"

namespace rlx {


struct BulkServerOptions {
  std::string host;                  // address to listen on ("" = every address)
  std::uint16_t port = 0;            // 0: a free one
  std::string secret;                // the cluster secret
  std::string name = "head";         // this node, as named in the challenge
  std::size_t max_connections = 256;
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds idle_timeout{600000};  // an authenticated connection with no request is closed
  Logger log;
  std::shared_ptr<StrangerWatch> watch;  // connections that never logged in (null: logged only)
  double max_bytes_per_s = 0;        // benchmarks only: chunks leave no faster than this, all connections
                                     // together (a head's link); 0: as fast as the sockets take them
};

class BulkServer {
 public:
  // Listens and serves `shelf`'s chunks until destroyed.
  static Result<std::unique_ptr<BulkServer>> start(BulkServerOptions options, std::shared_ptr<WeightShelf> shelf);
  ~BulkServer();  // closes every connection and joins every thread
  BulkServer(const BulkServer&) = delete;
  BulkServer& operator=(const BulkServer&) = delete;

  std::uint16_t port() const;
  struct Counts {
    std::uint64_t admitted = 0;       // connections that proved the secret
    std::uint64_t refused = 0;        // never logged in: silent, garbage, half a login, wrong proof, over the limit
    std::uint64_t chunks = 0;         // chunks served (counted as each is written)
    std::uint64_t bytes = 0;          // their bytes
  };
  Counts counts() const;

  struct Impl;

 private:
  explicit BulkServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct BulkClientOptions {
  std::string host;
  std::uint16_t port = 0;
  std::string node;                  // this node's name (must prove the secret for it)
  std::string secret;
  std::chrono::milliseconds timeout{20000};  // to connect, and for each reply
  std::uint32_t window = 16;         // requests in flight
  std::uint32_t max_tries = 4;       // per chunk, before the fetch fails
};

class BulkClient {
 public:
  explicit BulkClient(BulkClientOptions options);
  ~BulkClient();
  BulkClient(const BulkClient&) = delete;
  BulkClient& operator=(const BulkClient&) = delete;

  // Fetches every chunk `into` still misses (connecting first when not
  // connected). A damaged chunk is asked for again (max_tries). Returns
  // the number of chunks fetched again; on failure (refused, version not
  // held, connection lost, timeout, cancel) `into` keeps what arrived and
  // the connection is closed (the next fetch reconnects).
  Result<std::uint32_t> fetch(ChunkAssembler& into);

  // From any thread: a fetch in progress fails at once; later ones too.
  void cancel();

 private:
  Result<void> connect_and_login();
  void disconnect();

  BulkClientOptions options_;
  std::atomic<int> fd_{-1};
  std::atomic<bool> cancelled_{false};
  kj::Array<capnp::word> rx_;  // chunks are read into this, then checked and placed
};

}  // namespace rlx
