// Across nodes: segment throughput through CAF's middleman against raw
// loopback TCP, and the time from a weight publish until every member
// node's explorer-side fetch holds the new version, against the bytes /
// raw-bandwidth bound. Each "node" is its own actor system with its own
// middleman and TCP connections, in this process (docs/BENCHMARKS.md).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <mutex>
#include <thread>

#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "assembly/remote.hpp"
#include "actors/weight_relay.hpp"
#include "actors/weight_store.hpp"
#include "bench/common.hpp"
#include "bench/transfers.hpp"
#include "messages/codec.hpp"
#include "policy/weights_io.hpp"
#include "transport/front_door.hpp"
#include "transport/weight_bulk.hpp"

namespace rlx {
namespace {

// ---- weight publish to N member nodes ----

struct Arrivals {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, int> nodes_with;  // version -> member nodes whose "explorer" holds it
  std::string failed;                        // why a node's stand-in explorer could not take a version
};

// Stands in for a member node's explorers: on each notice, fetches the set
// from the node's store, decodes it and swaps it into a module's
// parameters as an explorer does (view_weights: the parameters view the
// set's message), or, with RLX_BENCH_SWAP=copy, copies it in
// (import_weights: what explorers did before, one copy).
bool swap_by_copy() {
  const char* swap = std::getenv("RLX_BENCH_SWAP");
  return swap && std::string(swap) == "copy";
}

// A module with a parameter for each of a set's tensors, named p0, p1, ...
// (a set's own names hold dots, which a parameter's may not).
struct Parameters : torch::nn::Module {
  explicit Parameters(const WeightSetData& w) {
    for (std::size_t i = 0; i < w.tensors.size(); ++i)
      register_parameter("p" + std::to_string(i), torch::zeros(w.tensors[i].shape));
  }
};

caf::behavior fetching_listener(caf::event_based_actor* self, weight_store_actor store, Arrivals* arrivals) {
  auto params = std::make_shared<std::shared_ptr<Parameters>>();
  const bool copy = swap_by_copy();
  return {[=](weights_atom, const WireMsg& m) {
    auto note = decode<WeightsAvailableData>(m.buf);
    if (!note) return;
    const auto v = note->version;
    self->request(store, std::chrono::seconds(60), fetch_atom::value, WireMsg{encode(WeightRequestData{v, false}, "bench")})
        .then([=](const WireMsg& set) {
          auto w = decode<WeightSetData>(set.buf);
          std::string why = !w ? w.error().message : w->tensors.empty() ? "no tensors" : "";
          if (why.empty()) {
            for (std::size_t i = 0; i < w->tensors.size(); ++i) w->tensors[i].name = "p" + std::to_string(i);
            if (!*params) *params = std::make_shared<Parameters>(*w);
            if (!(copy ? import_weights(**params, *w) : view_weights(**params, *w))) why = "the swap failed";
          }
          std::lock_guard<std::mutex> lock(arrivals->mu);
          if (why.empty()) ++arrivals->nodes_with[v];
          else arrivals->failed = "version " + std::to_string(v) + ": " + why;
          arrivals->cv.notify_all();
        });
  }};
}

// Versions of `params` weights as training makes them: from N(0, 0.05),
// every weight moves by up to `lr` (uniformly) per version, as Adam's
// steps do at that rate (docs/results/across-nodes.md "Weight deltas").
std::function<WireMsg(std::uint64_t)> trained_sets(std::size_t params, float lr) {
  auto values = std::make_shared<std::vector<float>>(params);
  auto rng = std::make_shared<std::mt19937>(5);
  std::normal_distribution<float> start(0.0f, 0.05f);
  for (auto& v : *values) v = start(*rng);
  return [=](std::uint64_t version) {
    std::uniform_real_distribution<float> step(-lr, lr);
    for (auto& v : *values) v += step(*rng);
    WeightSetData w;
    w.version = version;
    w.policy_kind = "moe_mlp";
    w.tensors.push_back(NamedTensor{"w", {static_cast<std::int64_t>(params)}, *values});
    w.checksum = w.compute_checksum();
    return WireMsg{encode(w, "bench")};
  };
}

struct Publish {
  double seconds = 0;          // median, from publish until every node's fetch decoded it
  double bytes_per_node = 0;   // bulk channel: frame bytes served per version per node
};

// Publishes `versions` sets from `make` until all `members` hold each, over
// the middleman alone or the bulk channel, the head cutting deltas or not;
// the figures are over the versions from `first_timed` on.
Publish publish_times(const ClusterConfig& c, int members, const std::function<WireMsg(std::uint64_t)>& make,
                      int versions, bool bulk, bool deltas, int first_timed, double link_bytes_per_s = 0) {
  Publish out;
  // Each node would be its own process with its own recycled memory (768
  // MiB): here they share one, so it gets the head's and every node's.
  set_recycled_spare_bytes((std::size_t{768} << 20) * static_cast<std::size_t>(members + 1));
  BenchNode head(c);
  WeightStoreOptions so{2, static_cast<std::uint64_t>(c.weight_store.chunk_kb) << 10, null_logger()};
  so.shelf = std::make_shared<WeightShelf>(so.keep_versions, so.chunk_bytes, 0, deltas);
  auto store = spawn_weight_store(*head.sys, so);
  head.actors.push_back(caf::actor_cast<caf::actor>(store));
  std::unique_ptr<BulkServer> server;
  if (bulk) {
    BulkServerOptions bo;
    bo.host = "127.0.0.1";
    bo.secret = kBenchSecret;
    bo.max_bytes_per_s = link_bytes_per_s;
    auto s = BulkServer::start(bo, so.shelf);
    if (!s) return out;
    server = std::move(*s);
  }
  auto port = head.sys->middleman().publish(store, 0, "127.0.0.1", true);
  if (!port) return out;
  Arrivals arrivals;
  std::vector<std::unique_ptr<BenchNode>> nodes;
  for (int i = 0; i < members; ++i) {
    nodes.push_back(std::make_unique<BenchNode>(c));
    auto& sys = *nodes.back()->sys;
    auto upstream = sys.middleman().remote_actor<weight_store_actor>("127.0.0.1", *port);
    if (!upstream) return out;
    auto local = spawn_weight_store(sys, WeightStoreOptions{2, 1 << 20, null_logger()});
    WeightRelayOptions ro;
    ro.upstream = *upstream;
    ro.local = local;
    ro.log = null_logger();
    if (server) {
      BulkClientOptions bo;
      bo.host = "127.0.0.1";
      bo.port = server->port();
      bo.node = "node-" + std::to_string(i);
      bo.secret = kBenchSecret;
      ro.bulk = bo;
    }
    auto relay = spawn_weight_relay(sys, ro);
    auto listener = sys.spawn(fetching_listener, local, &arrivals);
    nodes.back()->actors = {caf::actor_cast<caf::actor>(relay), caf::actor_cast<caf::actor>(local), listener};
    caf::anon_send(local, subscribe_atom::value, caf::actor_cast<weights_listener>(listener));
  }
  std::vector<double> times;
  std::uint64_t bytes_before = 0;
  for (int v = 1; v <= versions; ++v) {
    const WireMsg set = make(static_cast<std::uint64_t>(v));
    if (v == first_timed && server) bytes_before = server->counts().bytes;
    const auto t0 = Clock::now();
    caf::anon_send(store, publish_atom::value, set);
    std::unique_lock<std::mutex> lock(arrivals.mu);
    const bool all = arrivals.cv.wait_for(lock, std::chrono::seconds(120), [&] {
      return arrivals.nodes_with[static_cast<std::uint64_t>(v)] == members || !arrivals.failed.empty();
    });
    RLX_REQUIRE(arrivals.failed.empty(), "publish bench: " + arrivals.failed);
    RLX_REQUIRE(all, "publish bench: version " + std::to_string(v) + " did not reach every node in 120 s");
    if (v >= first_timed) times.push_back(seconds_since(t0));
  }
  out.seconds = median(times);
  if (server)
    out.bytes_per_node = static_cast<double>(server->counts().bytes - bytes_before) /
                         static_cast<double>((versions - first_timed + 1) * members);
  return out;  // the member nodes' systems go first (declared after the head's)
}

Row delta_row(const std::string& what, int members, const Publish& with, const Publish& without, const std::string& note) {
  return {fmt::format("weight publish with deltas, {}, {} member node(s)", what, members),
          fmt::format("{:.1f} ms, {:.2f} MB/node/version", with.seconds * 1e3, with.bytes_per_node / 1e6),
          fmt::format("{:.1f} ms, {:.2f} MB without deltas", without.seconds * 1e3, without.bytes_per_node / 1e6),
          fmt::format("{:.2f}", without.seconds / with.seconds), note};
}

}  // namespace

std::vector<Row> bench_publish_deltas(const EnvRegistry& envs, const std::string& what,
                                      const std::vector<WireBuffer>& sets, std::vector<int> members_list) {
  const ClusterConfig c = throughput_config(envs);
  auto from = [&](std::uint64_t v) {
    // The same bytes under the version asked for: a version is stamped in the set.
    auto w = decode<WeightSetData>(sets[v - 1]);
    RLX_REQUIRE(w.ok(), "bench set");
    w->version = v;
    return WireMsg{encode(*w, "bench")};
  };
  std::vector<Row> rows;
  const int n = static_cast<int>(sets.size());
  for (const int members : members_list) {
    const Publish without = publish_times(c, members, from, n, true, false, 2);
    const Publish with = publish_times(c, members, from, n, true, true, 2);
    std::fprintf(stderr, "  %s to %d node(s): %.1f ms / %.2f MB with deltas, %.1f ms / %.2f MB without\n", what.c_str(),
                 members, with.seconds * 1e3, with.bytes_per_node / 1e6, without.seconds * 1e3,
                 without.bytes_per_node / 1e6);
    rows.push_back(delta_row(what, members, with, without,
                             fmt::format("bulk channel, chunks of {} KiB; versions 2-{} (1 has no base), median; "
                                         "ratio: time without / with",
                                         c.weight_store.chunk_kb, n)));
  }
  return rows;
}

std::vector<Row> bench_nodes(const EnvRegistry& envs) {
  ClusterConfig c = throughput_config(envs);
  std::vector<Row> rows;
  // RLX_BENCH_NODES=publish: the weight rows alone; =bulk: the bulk
  // channel's whole-set publishes alone; =deltas: the delta rows alone.
  const std::string only = std::getenv("RLX_BENCH_NODES") ? std::getenv("RLX_BENCH_NODES") : "";
  const bool messages = only.empty();
  const bool whole_sets = only != "deltas";
  const bool deltas = only != "bulk";
  // Segment throughput: a CartPole segment (64 steps x 16 envs) and 1 MiB messages.
  for (const std::size_t size : {std::size_t{36} << 10, std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20}) {
    if (!messages) break;
    const std::size_t total = std::size_t{512} << 20;
    std::vector<double> caf_bw, raw_bw;
    for (int round = 0; round < 3; ++round) {
      raw_bw.push_back(raw_tcp_bytes_per_s(size, total));
      caf_bw.push_back(caf_bytes_per_s(c, size, total / size, size > (1 << 20) ? 4 : 16));
    }
    const double cb = median(caf_bw), rb = median(raw_bw);
    std::fprintf(stderr, "  %zu KiB messages: CAF %.2f GB/s, raw %.2f GB/s\n", size >> 10, cb / 1e9, rb / 1e9);
    rows.push_back({fmt::format("cross-node messages of {} KiB (window 16)", size >> 10),
                    fmt::format("{:.2f} GB/s, {:.0f} msg/s", cb / 1e9, cb / static_cast<double>(size)),
                    fmt::format("{:.2f} GB/s raw loopback TCP", rb / 1e9), fmt::format("{:.2f}", cb / rb),
                    "CAF 0.17 middleman (BASP), 2 workers; medians of 3"});
    if (size > (std::size_t{1} << 20)) continue;
    // The same through the head's front door, against the direct middleman in the same run.
    std::vector<double> direct, door;
    for (int round = 0; round < 3; ++round) {
      direct.push_back(caf_bytes_per_s(c, size, total / size, 16));
      door.push_back(caf_bytes_per_s(c, size, total / size, 16, true));
    }
    const double db = median(door), mb = median(direct);
    std::fprintf(stderr, "  %zu KiB messages through the front door: %.2f GB/s, direct %.2f GB/s\n", size >> 10,
                 db / 1e9, mb / 1e9);
    rows.push_back({fmt::format("cross-node messages of {} KiB through the head's front door", size >> 10),
                    fmt::format("{:.2f} GB/s, {:.0f} msg/s", db / 1e9, db / static_cast<double>(size)),
                    fmt::format("{:.2f} GB/s, the middleman direct", mb / 1e9), fmt::format("{:.2f}", db / mb),
                    "one relay thread (poll), 256 KiB buffers; medians of 3"});
  }
  // Weight publish to 1, 2, 4 member nodes, 1M and 25M parameters.
  const double raw = raw_tcp_bytes_per_s(std::size_t{1} << 20, std::size_t{1} << 30);
  if (const char* kb = std::getenv("RLX_BENCH_CHUNK_KB")) c.weight_store.chunk_kb = std::atoi(kb);  // experiments
  const std::uint64_t chunk_bytes = static_cast<std::uint64_t>(c.weight_store.chunk_kb) << 10;
  if (whole_sets && only != "bulk") {
    const double bulk_bw = bulk_bytes_per_s(25'000'000, chunk_bytes, 5);
    std::fprintf(stderr, "  bulk channel, 100 MB set: %.2f GB/s, raw %.2f GB/s\n", bulk_bw / 1e9, raw / 1e9);
    rows.push_back({"bulk channel: one node fetches a 25M-param set (100 MB)", fmt::format("{:.2f} GB/s", bulk_bw / 1e9),
                    fmt::format("{:.2f} GB/s raw loopback TCP", raw / 1e9), fmt::format("{:.2f}", bulk_bw / raw),
                    fmt::format("chunks of {} KiB, 16 requests in flight, every chunk's xxh64 checked; median of 5",
                                c.weight_store.chunk_kb)});
  }
  for (const bool bulk : {false, true}) {
    if (!whole_sets || (only == "bulk" && !bulk)) continue;
    for (const std::size_t params : {std::size_t{1'000'000}, std::size_t{25'000'000}}) {
      for (const int members : {1, 2, 4}) {
        const auto make = [params](std::uint64_t v) { return weight_set(v, params); };
        // Versions 4-8 (median of 5): by then a version's memory is one an
        // older version gave back, as in a long run; the first ones fault in pages.
        const double s = publish_times(c, members, make, 8, bulk, false, 4).seconds;
        const double bound = static_cast<double>(members) * static_cast<double>(params) * 4.0 / raw;
        std::fprintf(stderr, "  publish %zuM params to %d node(s) over the %s: %.1f ms (bound %.1f ms)\n",
                     params / 1'000'000, members, bulk ? "bulk channel" : "middleman", s * 1e3, bound * 1e3);
        rows.push_back({fmt::format("weight publish ({}), {}M params, {} member node(s)", bulk ? "bulk" : "middleman",
                                    params / 1'000'000, members),
                        fmt::format("{:.1f} ms", s * 1e3),
                        fmt::format("{:.1f} ms bytes/raw-TCP bound", bound * 1e3), fmt::format("{:.2f}", bound / s),
                        fmt::format("chunks of {} KiB, {} in flight per node; until every node's explorer swapped it in ({}); versions 4-8",
                                    c.weight_store.chunk_kb, bulk ? 16 : 4,
                                    swap_by_copy() ? "copied: import_weights" : "viewed: view_weights")});
      }
    }
  }
  // Deltas: 25M parameters as Adam at lr 1e-4 moves them, with and without,
  // over loopback and over a head link paced to 10 or 1 Gb/s (what the
  // head's NIC gives all its nodes together).
  for (const double link : {0.0, 1.25e9, 1.25e8}) {
    if (!deltas) break;
    for (const int members : {1, 2, 4}) {
      const Publish without = publish_times(c, members, trained_sets(25'000'000, 1e-4f), 6, true, false, 3, link);
      const Publish with = publish_times(c, members, trained_sets(25'000'000, 1e-4f), 6, true, true, 3, link);
      const std::string where = link > 0 ? fmt::format("{:.0f} Gb/s head link", link * 8 / 1e9) : "loopback";
      std::fprintf(stderr, "  25M trained params to %d node(s), %s: %.1f ms / %.2f MB with deltas, %.1f ms / %.2f MB without\n",
                   members, where.c_str(), with.seconds * 1e3, with.bytes_per_node / 1e6, without.seconds * 1e3,
                   without.bytes_per_node / 1e6);
      rows.push_back(delta_row("25M params moved by lr 1e-4, " + where, members, with, without,
                               fmt::format("bulk channel, chunks of {} KiB; versions 3-6, median; from N(0, 0.05), "
                                           "each weight moved by up to 1e-4 a version; ratio: time without / with",
                                           c.weight_store.chunk_kb)));
    }
  }
  return rows;
}

}  // namespace rlx
