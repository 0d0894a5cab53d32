#include "tools/scale_cmd.hpp"

#include <cstdio>

#include <unistd.h>

#include <caf/all.hpp>

#include "assembly/remote.hpp"
#include "core/auth.hpp"
#include "tools/launch_cmd.hpp"

namespace rlx {

int scale_command(const ScaleArgs& args) {
  auto config = config_or_report(args.config, builtin_envs());
  if (!config) return 2;
  if (args.explorers < 0 && args.rewards < 0) {
    std::fprintf(stderr, "rlx scale: give --explorers N and/or --rewards N\n");
    return 2;
  }
  auto hp = parse_host_port(args.head);
  if (!hp) {
    std::fprintf(stderr, "rlx scale: --head %s\n", hp.error().message.c_str());
    return 2;
  }
  auto secret = load_cluster_secret(args.secret_file);
  if (!secret) {
    std::fprintf(stderr, "rlx: %s\n", secret.error().message.c_str());
    return 2;
  }
  LogOptions lo;
  lo.level = "warn";
  const Logger log = make_root_logger(lo);
  caf::actor_system_config cfg;
  configure_remoting(cfg, *config);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{cfg};
  auto gate = connect_gate(system, *config, hp->first, hp->second, 10.0, log);
  if (!gate) {
    std::fprintf(stderr, "rlx scale: %s\n", gate.error().message.c_str());
    return 4;
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string caller = "rlx-scale@" + std::string(host);
  const auto timeout = std::chrono::seconds(30);
  int code = 4;
  std::string said;
  caf::scoped_actor self{system};
  self->request(*gate, timeout, hello_atom::value, caller)
      .receive([&](const std::string& nonce) {
        self->request(*gate, timeout, scale_atom::value, caller, nonce, secret_proof(*secret, nonce, caller),
                      args.explorers, args.rewards)
            .receive(
                [&](const std::string& answer) {
                  said = answer;
                  code = 0;
                },
                [&](caf::error& e) {
                  said = error_text(system, e);
                  // A refusal or a request the coordinator turned down is an answer; silence is not.
                  code = e == caf::sec::request_timeout ? 4 : 2;
                });
      },
      [&](caf::error& e) { said = "the head's gate did not answer: " + error_text(system, e); });
  std::fprintf(code == 0 ? stdout : stderr, "%s%s\n", code == 0 ? "" : "rlx scale: ", said.c_str());
  return code;
}

}  // namespace rlx
