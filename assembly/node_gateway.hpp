// The gateway a run serves when env = "tokens:gateway" (docs/gateway.md):
// the hub its explorers decode for and the HTTP endpoint harnesses call,
// started before anything else of the run (a port it cannot take fails
// the start with nothing to undo), and <log_dir>/gateway.json (mode 0600)
// saying where it listens and the bearer token it takes. Closing it fails
// every turn still waiting, so no harness and no server thread is left
// hanging when the run ends.
#pragma once

#include <memory>
#include <string>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#include "gateway/gateway_hub.hpp"
#include "gateway/gateway_server.hpp"
#include "transport/strangers.hpp"

namespace rlx {

struct NodeGateway {
  std::shared_ptr<GatewayHub> hub;
  std::unique_ptr<GatewayServer> server;
  std::string url;
  Logger log;
  // Closes the hub ("the run ended"), then stops the endpoint.
  ~NodeGateway();
  // One line of what it served and how sessions ended.
  std::string summary() const;
};

// `secret`: the cluster secret the token derives from ("" with no
// [gateway] token_file: a random token, in gateway.json only). `node`: ""
// on the head (<log_dir>/gateway.json), a member node's name on a member
// (<log_dir>/gateway-NAME.json on its host: every node of a gateway run
// serves its own explorers). Null when the run is not env = "tokens:gateway".
Result<std::unique_ptr<NodeGateway>> start_node_gateway(const ClusterConfig& config, const std::string& secret,
                                                        std::shared_ptr<StrangerWatch> strangers, const Logger& log,
                                                        const std::string& node = "");

// Where a node's gateway says where it listens.
std::string gateway_file_name(const std::string& node);

}  // namespace rlx
