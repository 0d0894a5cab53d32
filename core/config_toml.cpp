// A ClusterConfig written back as TOML: the effective configuration (as
// edited by code, e.g. tests and benchmarks), for the rollout log's start
// entry and for learner rank processes. parse_config(to_toml(c)) == c.
// Every section's keys come from their declarations (core/config_keys.hpp).
#include <sstream>

#include <toml++/toml.h>

#include "core/config.hpp"
#include "core/config_keys.hpp"

namespace rlx {

std::string to_toml(const ClusterConfig& c) {
  namespace k = config_keys;
  toml::table root;
  auto run = k::write_section(k::run_keys(), c.run);
  run.insert("stop", k::write_section(k::stop_keys(), c.run.stop));
  root.insert("run", run);
  auto policy = k::write_section(k::policy_keys(), c.policy);
  policy.insert("lora", k::write_section(k::lora_keys(), c.policy.lora));
  root.insert("policy", policy);
  root.insert("tokens", k::write_section(k::tokens_keys(), c.tokens));
  root.insert("learner", k::write_section(k::learner_keys(), c.learner));
  root.insert("explorer", k::write_section(k::explorer_keys(), c.explorer));
  root.insert("weight_store", k::write_section(k::weight_store_keys(), c.weight_store));
  root.insert("launch", k::write_section(k::launch_keys(), c.launch));
  root.insert("reward", k::write_section(k::reward_keys(), c.reward));
  root.insert("autoscale", k::write_section(k::autoscale_keys(), c.autoscale));
  if (c.tls.enabled()) root.insert("tls", k::write_section(k::tls_keys(), c.tls));
  root.insert("record", k::write_section(k::record_keys(), c.record));
  auto external = k::write_section(k::external_keys(), c.external);
  toml::table env;
  for (const auto& kv : c.external.env) {
    const auto eq = kv.find('=');
    env.insert(kv.substr(0, eq), eq == std::string::npos ? std::string() : kv.substr(eq + 1));
  }
  external.insert("env", env);
  root.insert("external", external);
  root.insert("log", k::write_section(k::log_keys(), c.log));
  root.insert("metrics", k::write_section(k::metrics_keys(), c.metrics));
  root.insert("alerts", k::write_section(k::alerts_keys(), c.alerts));
  root.insert("gateway", k::write_section(k::gateway_keys(), c.gateway));
  toml::array nodes;
  for (const auto& n : c.nodes) nodes.push_back(k::write_section(k::node_keys(), n));
  root.insert("node", nodes);
  std::ostringstream os;
  os << "# The effective configuration of a run, written by RLX.\n" << root << "\n";
  return os.str();
}

}  // namespace rlx
