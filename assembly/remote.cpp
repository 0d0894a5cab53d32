#include "assembly/remote.hpp"

#include <filesystem>
#include <fstream>

#include "core/auth.hpp"
#include "core/files.hpp"

#include <chrono>
#include <thread>

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

namespace rlx {

void configure_remoting(caf::actor_system_config& cfg, const ClusterConfig& config) {
  register_handle_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.workers", 2);  // measured: +25 % for 1 MiB messages (DEPS.md)
  if (config.tls.enabled()) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = config.tls.certificate;
    cfg.openssl_key = config.tls.key;
    cfg.openssl_cafile = config.tls.ca;  // peers must present a certificate signed by it
  }
}

Result<std::uint16_t> publish_gate(const gate_actor& gate, const ClusterConfig& config, const std::string& host,
                                   std::uint16_t port) {
  const char* in = host.empty() ? nullptr : host.c_str();
  auto r = config.tls.enabled() ? caf::openssl::publish(gate, port, in, true)
                                : gate.home_system().middleman().publish(gate, port, in, true);
  if (!r)
    return make_error(Errc::io, "cannot listen on " + host + ":" + std::to_string(port) + ": " +
                                    gate.home_system().render(r.error()));
  return *r;
}

Result<gate_actor> connect_gate(caf::actor_system& system, const ClusterConfig& config, const std::string& host,
                                std::uint16_t port, double timeout_s, const Logger& log,
                                const std::atomic<bool>* cancel, const gate_actor& dead) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::milliseconds(100);
  std::string last;
  for (int attempt = 1;; ++attempt) {
    auto r = config.tls.enabled() ? caf::openssl::remote_actor<gate_actor>(system, host, port)
                                  : system.middleman().remote_actor<gate_actor>(host, port);
    if (r && (!dead || r->address() != dead.address())) return *r;
    last = r ? std::string("the dead head's handle is still cached") : system.render(r.error());
    if (cancel && cancel->load()) return make_error(Errc::timeout, "gave up reaching the head: the node is leaving");
    if (std::chrono::steady_clock::now() + pause >= deadline) break;
    if (attempt == 1 || attempt % 10 == 0) log->info("head {}:{} not reachable yet ({}); retrying", host, port, last);
    // Reconnect back-off, not synchronisation: the head may not be listening yet.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));  // a closed port answers at once: retrying is cheap
  }
  return make_error(Errc::timeout, "cannot reach the head at " + host + ":" + std::to_string(port) + " within " +
                                       std::to_string(static_cast<int>(timeout_s)) + " s: " + last);
}

Result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return make_error(Errc::config_range, "'" + s + "' is not HOST:PORT");
  try {
    std::size_t used = 0;
    const int port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || port < 1 || port > 65535) throw std::out_of_range("port");
    std::string host = s.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_pair(host, static_cast<std::uint16_t>(port));
  } catch (const std::exception&) {
    return make_error(Errc::config_range, "'" + s + "': the port must be a number in 1..65535");
  }
}

std::string error_text(caf::actor_system& system, const caf::error& e) {
  const caf::message& context = e.context();
  if (context.match_elements<std::string>()) return context.get_as<std::string>(0);
  return system.render(e);
}

std::string reachable_address(const std::string& host, std::uint16_t port) {
  const std::string h = host.empty() || host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

namespace {

// The first line of a small text file ("" when it cannot be read).
std::string remote_first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

// The run's id, kept in <log_dir>/run.id across --resume so that member
// nodes that outlived the head can tell the restarted head is their run's.
std::string run_identity(const ClusterConfig& config, bool resume, const Logger& log) {
  const std::filesystem::path file = std::filesystem::path(config.run.log_dir) / "run.id";
  if (resume) {
    if (std::string id = remote_first_line(file); !id.empty()) return id;
    log->warn("{} is missing: member nodes of the run before cannot rejoin this head", file.string());
  }
  std::string id = random_nonce();
  std::error_code ec;
  std::filesystem::create_directories(config.run.log_dir, ec);
  if (auto w = write_text_atomically(file, id + "\n"); !w) log->warn("cannot write {}: {}", file.string(), w.error().message);
  return id;
}

// Opens the head's port. The gate is published on 127.0.0.1 (a free port)
// and a front door on the head's address lets through only connections
// that open with CAF's handshake (TLS's under [tls]); strangers are closed
// within [launch] stranger_timeout_s and counted. A resumed head whose
// topology leaves the port to the system listens where its previous run
// did (head.addr), so that member nodes waiting for it find it; failing
// that, anywhere.
std::chrono::milliseconds stranger_timeout(const ClusterConfig& config) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(config.launch.stranger_timeout_s * 1000));
}

Result<std::unique_ptr<FrontDoor>> open_head_port(const gate_actor& gate, const ClusterConfig& config, bool resume,
                                                   std::shared_ptr<StrangerWatch> watch, const Logger& log) {
  const auto& head = config.head();
  auto inner = publish_gate(gate, config, "127.0.0.1", 0);
  if (!inner) return inner.error();
  FrontDoorOptions o;
  o.name = "head";
  o.host = head.host;
  o.port = static_cast<std::uint16_t>(head.port);
  o.inner_port = *inner;
  o.opening = config.tls.enabled() ? tls_opening() : basp_opening();
  o.opening_timeout = stranger_timeout(config);
  o.watch = std::move(watch);
  o.log = child_logger(log, "door");
  if (resume && head.port == 0) {
    if (auto before = parse_host_port(remote_first_line(std::filesystem::path(config.run.log_dir) / "head.addr"))) {
      auto again = o;
      again.port = before->second;
      auto door = FrontDoor::start(again);
      if (door) return door;
      log->warn("cannot listen on port {} again, as the run did before ({}): nodes waiting for the head there "
                "will not find it",
                before->second, door.error().message);
    }
  }
  return FrontDoor::start(o);
}

}  // namespace rlx
