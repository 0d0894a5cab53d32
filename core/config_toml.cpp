// A ClusterConfig written back as TOML: the effective configuration (as
// edited by code, e.g. tests and benchmarks), for the rollout log's start
// entry and for learner rank processes. parse_config(to_toml(c)) == c.
#include <sstream>

#include <toml++/toml.h>

#include "core/config.hpp"

namespace rlx {

namespace {

toml::array strings(const std::vector<std::string>& v) {
  toml::array a;
  for (const auto& s : v) a.push_back(s);
  return a;
}

}  // namespace

std::string to_toml(const ClusterConfig& c) {
  toml::table root;
  const auto& r = c.run;
  root.insert("run", toml::table{{"name", r.name},
                                 {"seed", static_cast<std::int64_t>(r.seed)},
                                 {"env", r.env},
                                 {"max_staleness", static_cast<std::int64_t>(r.max_staleness)},
                                 {"mode", r.mode},
                                 {"log_dir", r.log_dir},
                                 {"report_interval_s", r.report_interval_s},
                                 {"record", r.record},
                                 {"stop", toml::table{{"mean_return", r.stop.mean_return},
                                                      {"max_env_steps", static_cast<std::int64_t>(r.stop.max_env_steps)},
                                                      {"max_seconds", r.stop.max_seconds}}}});
  const auto& p = c.policy;
  root.insert("policy", toml::table{{"kind", p.kind},
                                    {"hidden", p.hidden},
                                    {"experts", p.experts},
                                    {"top_k", p.top_k},
                                    {"load_balance_coef", p.load_balance_coef},
                                    {"d_model", p.d_model},
                                    {"layers", p.layers},
                                    {"heads", p.heads},
                                    {"expert_hidden", p.expert_hidden},
                                    {"max_len", p.max_len},
                                    {"capacity_factor", p.capacity_factor},
                                    {"router_z_coef", p.router_z_coef},
                                    {"router_replay", p.router_replay},
                                    {"init", p.init}});
  const auto& k = c.tokens;
  root.insert("tokens", toml::table{{"group_size", k.group_size},
                                    {"max_new_tokens", k.max_new_tokens},
                                    {"temperature", k.temperature},
                                    {"top_p", k.top_p},
                                    {"eval_tasks", k.eval_tasks},
                                    {"eval_every", k.eval_every},
                                    {"hint_coef", k.hint_coef}});
  const auto& l = c.learner;
  root.insert("learner", toml::table{{"algorithm", l.algorithm},   {"device", l.device},
                                     {"ranks", l.ranks},           {"collectives", l.collectives},
                                     {"batch_segments", l.batch_segments},
                                     {"lr", l.lr},                 {"warmup_updates", l.warmup_updates},
                                     {"publish_every", l.publish_every},
                                     {"epochs", l.epochs},         {"minibatches", l.minibatches},
                                     {"gamma", l.gamma},           {"gae_lambda", l.gae_lambda},
                                     {"clip", l.clip},             {"rho_bar", l.rho_bar},
                                     {"c_bar", l.c_bar},           {"entropy_coef", l.entropy_coef},
                                     {"value_coef", l.value_coef}, {"max_grad_norm", l.max_grad_norm},
                                     {"threads", l.threads},       {"checkpoint_every", l.checkpoint_every},
                                     {"checkpoint_keep", l.checkpoint_keep}});
  root.insert("explorer", toml::table{{"segment_steps", c.explorer.segment_steps},
                                      {"env_placement", c.explorer.env_placement},
                                      {"threads", c.explorer.threads},
                                      {"reward_timeout_s", c.explorer.reward_timeout_s}});
  root.insert("weight_store",
              toml::table{{"keep_versions", c.weight_store.keep_versions},
                          {"chunk_kb", c.weight_store.chunk_kb},
                          {"bulk", c.weight_store.bulk}});
  root.insert("launch", toml::table{{"ssh_command", c.launch.ssh_command},
                                    {"slurm_submit", c.launch.slurm_submit},
                                    {"slurm_options", strings(c.launch.slurm_options)},
                                    {"rlx_binary", c.launch.rlx_binary},
                                    {"connect_timeout_s", c.launch.connect_timeout_s},
                                    {"join_timeout_s", c.launch.join_timeout_s},
                                    {"heartbeat_s", c.launch.heartbeat_s},
                                    {"evict_after_s", c.launch.evict_after_s},
                                    {"reconnect_s", c.launch.reconnect_s},
                                    {"listen", c.launch.listen}});
  root.insert("reward", toml::table{{"scorer", c.reward.scorer}});
  root.insert("autoscale", toml::table{{"enabled", c.autoscale.enabled},
                                       {"min_explorers", c.autoscale.min_explorers},
                                       {"max_explorers", c.autoscale.max_explorers},
                                       {"interval_s", c.autoscale.interval_s},
                                       {"idle_above", c.autoscale.idle_above},
                                       {"stale_above", c.autoscale.stale_above}});
  if (c.tls.enabled())
    root.insert("tls", toml::table{{"certificate", c.tls.certificate}, {"key", c.tls.key}, {"ca", c.tls.ca}});
  root.insert("record", toml::table{{"file_mb", c.record.file_mb},
                                    {"compress", c.record.compress},
                                    {"compress_level", c.record.compress_level}});
  toml::table env;
  for (const auto& kv : c.external.env) {
    const auto eq = kv.find('=');
    env.insert(kv.substr(0, eq), eq == std::string::npos ? std::string() : kv.substr(eq + 1));
  }
  root.insert("external", toml::table{{"args", strings(c.external.args)},
                                      {"protocol", c.external.protocol},
                                      {"timeout_s", c.external.timeout_s},
                                      {"max_restarts", c.external.max_restarts},
                                      {"cwd", c.external.cwd},
                                      {"env", env}});
  root.insert("log", toml::table{{"level", c.log.level}});
  toml::array nodes;
  for (const auto& n : c.nodes)
    nodes.push_back(toml::table{{"name", n.name},
                                {"host", n.host},
                                {"port", n.port},
                                {"actors", strings(n.actors)},
                                {"explorers", n.explorers},
                                {"envs_per_explorer", n.envs_per_explorer},
                                {"rewards", n.rewards},
                                {"learner_ranks", n.learner_ranks},
                                {"launcher", n.launcher}});
  root.insert("node", nodes);
  std::ostringstream os;
  os << "# The effective configuration of a run, written by RLX.\n" << root << "\n";
  return os.str();
}

}  // namespace rlx
