// CAF remoting for a multi-node cluster: the actor system settings (the
// middleman, and the openssl module when [tls] is set), publishing the
// head's gate and reaching it from a member node, over plain TCP or TLS.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <string>

#include "actors/interfaces.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "transport/front_door.hpp"
#include "transport/strangers.hpp"

namespace rlx {

// Loads the middleman (and openssl with [tls]) and registers RLX's types.
void configure_remoting(caf::actor_system_config& cfg, const ClusterConfig& config);

// Publishes `gate` on host:port (port 0: a free one). Returns the port.
Result<std::uint16_t> publish_gate(const gate_actor& gate, const ClusterConfig& config, const std::string& host,
                                   std::uint16_t port);

// Reaches the gate at host:port, retrying until `timeout_s` (the head may
// still be starting). Fails with the last error, or at the next retry once
// `cancel` (when given) is set. A `dead` gate (a head that went away) is
// never the answer: CAF's middleman caches the handle it returned for
// host:port until it hears the proxy is down, so asking right after losing
// the head can hand back the dead one.
Result<gate_actor> connect_gate(caf::actor_system& system, const ClusterConfig& config, const std::string& host,
                                std::uint16_t port, double timeout_s, const Logger& log,
                                const std::atomic<bool>* cancel = nullptr, const gate_actor& dead = {});

// Where other processes reach a head that listens on host:port: "HOST:PORT"
// (its loopback when it listens on every address; IPv6 in brackets).
std::string reachable_address(const std::string& host, std::uint16_t port);

// What an error says: its text when it carries one (an RLX refusal), else
// CAF's rendering of it.
std::string error_text(caf::actor_system& system, const caf::error& e);

// "HOST:PORT" -> host and port.
Result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& s);

// The run's id, kept in <log_dir>/run.id across --resume so that member
// nodes that outlived the head can tell the restarted head is their run's.
std::string run_identity(const ClusterConfig& config, bool resume, const Logger& log);

// [launch] stranger_timeout_s.
std::chrono::milliseconds stranger_timeout(const ClusterConfig& config);

// Opens the head's port: the gate published on 127.0.0.1 behind a front
// door on the head's address (docs/cluster.md); a resumed head listens
// where its previous run did when it can.
Result<std::unique_ptr<FrontDoor>> open_head_port(const gate_actor& gate, const ClusterConfig& config, bool resume,
                                                   std::shared_ptr<StrangerWatch> watch, const Logger& log);

}  // namespace rlx
