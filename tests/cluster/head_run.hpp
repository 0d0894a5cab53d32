// A multi-node run in one test process: the head (its own actor system,
// serving the gate) and member nodes (each with its own actor system and
// middleman), over TCP on loopback.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "assembly/member_node.hpp"

namespace rlx::test {

using namespace std::chrono_literals;

// A multi-node head run in this process (its own actor system, serving the
// gate): its port, its live node count (from the status hook), a stop.
struct HeadRun {
  RunHooks hooks;
  std::promise<std::uint16_t> listening;
  std::mutex mu;
  std::condition_variable changed;
  std::uint64_t nodes = 0;
  std::function<void(const std::string&)> stop_fn;
  std::future<RunResult> result;
  std::uint16_t port = 0;
  std::promise<std::uint16_t> bulk_listening;  // the bulk channel's port

  HeadRun(const ClusterConfig& cfg, const std::string& secret) {
    hooks.on_listening = [this](std::uint16_t p) {
      listening.set_value(p);
      return std::string();
    };
    hooks.on_bulk_listening = [this](std::uint16_t p) { bulk_listening.set_value(p); };
    hooks.on_start = [this](std::function<void(const std::string&)> stop) {
      std::lock_guard<std::mutex> lock(mu);
      stop_fn = std::move(stop);
    };
    hooks.on_status = [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      nodes = s.nodes;
      changed.notify_all();
    };
    RunOptions options;
    options.serve = true;
    options.secret = secret;
    result = std::async(std::launch::async,
                        [this, cfg, options] { return run_cluster(cfg, builtin_envs(), hooks, null_logger(), options); });
    auto port_future = listening.get_future();
    REQUIRE(port_future.wait_for(60s) == std::future_status::ready);
    port = port_future.get();
  }
  bool wait_for_nodes(std::uint64_t n, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, limit, [&] { return nodes >= n; });
  }
  void stop(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(stop_fn);
    stop_fn(why);
  }
  RunResult wait() {
    REQUIRE(result.wait_for(300s) == std::future_status::ready);
    return result.get();
  }
};

// Runs member node `node` of `cfg` against the head at 127.0.0.1:port, in this process.
inline std::future<MemberNodeResult> run_member(const ClusterConfig& cfg, const std::string& node, std::uint16_t port,
                                         const std::string& secret) {
  MemberNodeOptions mo;
  mo.node = node;
  mo.head_host = "127.0.0.1";
  mo.head_port = port;
  mo.secret = secret;
  return std::async(std::launch::async, [cfg, mo] { return run_member_node(cfg, builtin_envs(), mo, null_logger()); });
}

}  // namespace rlx::test
