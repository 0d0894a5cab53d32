#include "core/config.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <toml++/toml.h>
#include <unistd.h>

#include "core/config_keys.hpp"
#include "core/config_reader.hpp"
#include "core/topology_paths.hpp"

namespace rlx {
namespace {

using config_detail::ConfigFailure;
using config_detail::TableReader;
using config_detail::join;

// "cpu", "cuda" or "cuda:N" (whether this build and machine have CUDA is
// checked when the learner starts: Trainer's check_device).
bool valid_device_name(const std::string& d) {
  if (d == "cpu" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 8) return false;
  return std::all_of(d.begin() + 5, d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Reads a section's table, if the file has one, with its declared keys.
template <class S>
const toml::table* read_table(TableReader& top, const std::string& name, const std::vector<config_keys::Key<S>>& keys,
                              S& out, std::string_view source) {
  const toml::table* t = top.table(name);
  if (!t) return nullptr;
  TableReader r(*t, name, source);
  config_keys::read_section(r, keys, out);
  return t;
}

// A control character as a TOML escape.
std::string fmt_control(char ch) {
  static const char* hex = "0123456789abcdef";
  return std::string("\\u00") + hex[(ch >> 4) & 0xf] + hex[ch & 0xf];
}

// `--set KEY=VALUE`: VALUE read as a TOML value (a bare word that is not
// one is a string) and put at the dotted KEY, over what the file says.
Result<void> apply_override(toml::table& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  const std::string where = "--set " + assignment;
  if (eq == std::string::npos || key.empty() || key.front() == '.' || key.back() == '.' ||
      key.find("..") != std::string::npos)
    return make_error(Errc::config_parse,
                      where + ": expected KEY=VALUE with a dotted key, e.g. run.stop.max_updates=5");
  const std::string value = assignment.substr(eq + 1);
  toml::table snippet;
  try {
    snippet = toml::parse("v = " + value, where);
  } catch (const toml::parse_error&) {
    // A bare word: the string itself, as a TOML string (so that an error
    // in it still names the --set).
    std::string quoted = "v = \"";
    for (const char ch : value) {
      if (ch == '"' || ch == '\\') quoted += '\\';
      if (static_cast<unsigned char>(ch) < 0x20) {
        quoted += fmt_control(ch);
        continue;
      }
      quoted += ch;
    }
    try {
      snippet = toml::parse(quoted + "\"", where);
    } catch (const toml::parse_error& e) {
      return make_error(Errc::config_parse, where + ": " + std::string(e.description()));
    }
  }
  toml::table* table = &root;
  std::size_t from = 0;
  for (auto dot = key.find('.'); dot != std::string::npos; from = dot + 1, dot = key.find('.', from)) {
    const std::string part = key.substr(0, dot);
    const std::string name = key.substr(from, dot - from);
    toml::node* next = table->get(name);
    if (!next) next = &table->insert_or_assign(name, toml::table{}).first->second;
    if (!next->is_table())
      return make_error(Errc::config_type, where + ": " + part + " is not a table" +
                                               (next->is_array() ? " (an array: set it in the file)" : ""));
    table = next->as_table();
  }
  table->insert_or_assign(key.substr(from), std::move(*snippet.get("v")));
  return {};
}

}  // namespace

std::uint64_t WeightStoreConfig::max_set_bytes() const {
  if (max_set_mb > 0) return static_cast<std::uint64_t>(max_set_mb) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                               : std::uint64_t{1} << 30;
}

std::int64_t ClusterConfig::total_explorers() const {
  std::int64_t n = 0;
  for (const auto& node : nodes) n += node.explorers;
  return n;
}

const NodeConfig& ClusterConfig::head() const {
  for (const auto& n : nodes)
    if (std::find(n.actors.begin(), n.actors.end(), "coordinator") != n.actors.end()) return n;
  return nodes.front();
}

const NodeConfig* ClusterConfig::node(const std::string& name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

std::pair<std::uint32_t, std::uint64_t> ClusterConfig::first_ids(const std::string& name) const {
  std::uint32_t explorer = 0;
  std::uint64_t env = 0;
  for (const auto& n : nodes) {
    if (n.name == name) break;
    explorer += static_cast<std::uint32_t>(n.explorers);
    env += static_cast<std::uint64_t>(n.explorers * n.envs_per_explorer);
  }
  return {explorer, env};
}

std::uint32_t ClusterConfig::first_reward_id(const std::string& name) const {
  std::uint32_t id = 0;
  for (const auto& n : nodes) {
    if (n.name == name) break;
    id += static_cast<std::uint32_t>(n.rewards);
  }
  return id;
}

Result<ClusterConfig> parse_config(std::string_view text, std::string_view source,
                                   const std::vector<std::string>& known_envs,
                                   const std::vector<std::string>& overrides) {
  ClusterConfig c;
  c.source = std::string(source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return make_error(Errc::config_parse, os.str());
  }
  for (const auto& o : overrides)
    if (auto r = apply_override(root, o); !r) return r.error();
  try {
    TableReader top(root, "", source);
    namespace k = config_keys;
    if (const toml::table* t = top.table("run")) {
      TableReader r(*t, "run", source);
      k::read_section(r, k::run_keys(), c.run);
      if (const toml::table* st = r.table("stop")) {
        TableReader s(*st, "run.stop", source);
        k::read_section(s, k::stop_keys(), c.run.stop);
      }
      const auto& env = c.run.env;
      const bool exec = env.rfind("exec:", 0) == 0;
      const bool tokens = env == "tokens:arithmetic" || env == "tokens:code" || env == "tokens:workspace" ||
                          env == "tokens:gateway";
      if (exec && env.find_first_not_of(" \t", 5) == std::string::npos)
        r.fail(Errc::config_range, t->get("env"), "env", "\"exec:\" needs a command, e.g. \"exec:python3 env.py\"");
      if (!exec && !tokens && std::find(known_envs.begin(), known_envs.end(), env) == known_envs.end())
        r.fail(Errc::config_unknown_name, t->get("env"), "env",
               "allowed: " + join(known_envs) +
                   ", \"tokens:arithmetic\", \"tokens:code\", \"tokens:workspace\", \"tokens:gateway\", or "
                   "\"exec:COMMAND ARGS...\"");
    }
    if (const toml::table* t = read_table(top, "policy", k::policy_keys(), c.policy, source)) {
      TableReader r(*t, "policy", source);
      if (const toml::table* lt = r.table("lora")) {
        TableReader lr(*lt, "policy.lora", source);
        k::read_section(lr, k::lora_keys(), c.policy.lora);
        if (c.policy.lora.rank > 0 && c.policy.lora.targets.empty() && !c.policy.lora.router)
          lr.fail(Errc::config_range, lt->get("targets"), "targets",
                  "names no module to adapt: list some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                  "down_proj, experts (RLX's own layout: qkv, o_proj, experts)");
      }
      if (c.policy.d_model % c.policy.heads != 0)
        r.fail(Errc::config_range, t->get("heads"), "heads", "must divide d_model");
      if (c.policy.experts > 254)
        r.fail(Errc::config_range, t->get("experts"), "experts", "at most 254 (routes travel as one byte)");
      if (c.policy.top_k > c.policy.experts)
        r.fail(Errc::config_range, t->get("top_k"), "top_k",
               "allowed: top_k <= experts, got experts = " + std::to_string(c.policy.experts));
    }
    if (const toml::table* t = read_table(top, "learner", k::learner_keys(), c.learner, source)) {
      TableReader r(*t, "learner", source);
      if (!valid_device_name(c.learner.device))
        r.fail(Errc::config_range, t->get("device"), "device", "allowed: \"cpu\", \"cuda\" or \"cuda:N\"");
      if (c.learner.collectives == Collectives::nccl && c.learner.device == "cpu")
        r.fail(Errc::config_range, t->get("collectives"), "collectives",
               "nccl carries GPU tensors: it needs device = \"cuda\" or \"cuda:N\"");
    }
    read_table(top, "explorer", k::explorer_keys(), c.explorer, source);
    read_table(top, "weight_store", k::weight_store_keys(), c.weight_store, source);
    read_table(top, "record", k::record_keys(), c.record, source);
    if (const toml::table* t = read_table(top, "external", k::external_keys(), c.external, source)) {
      TableReader r(*t, "external", source);
      if (const toml::table* e = r.table("env")) {
        TableReader er(*e, "external.env", source);
        for (const auto& [key, v] : *e) {
          std::string value;
          er.string(std::string(key.str()), value);
          c.external.env.push_back(std::string(key.str()) + "=" + value);
        }
      }
    }
    read_table(top, "log", k::log_keys(), c.log, source);
    read_table(top, "metrics", k::metrics_keys(), c.metrics, source);
    read_table(top, "gateway", k::gateway_keys(), c.gateway, source);
    if (const toml::table* t = read_table(top, "alerts", k::alerts_keys(), c.alerts, source)) {
      TableReader r(*t, "alerts", source);
      const auto& url = c.alerts.webhook;
      const bool scheme = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
      if (!url.empty() && (!scheme || url.find("://") + 3 >= url.size()))
        r.fail(Errc::config_range, t->get("webhook"), "webhook", "allowed: an http:// or https:// URL");
    }
    if (const toml::table* t = read_table(top, "launch", k::launch_keys(), c.launch, source)) {
      TableReader r(*t, "launch", source);
      if (c.launch.ssh_command.find("{command}") == std::string::npos)
        r.fail(Errc::config_range, t->get("ssh_command"), "ssh_command", "must contain {command}");
      if (!c.launch.rlx_binary.empty() && c.launch.rlx_binary.front() != '/')
        r.fail(Errc::config_range, t->get("rlx_binary"), "rlx_binary",
               "an absolute path (it names rlx on the other hosts, where no folder of this one applies)");
      if (c.launch.evict_after_s < 2 * c.launch.heartbeat_s)
        r.fail(Errc::config_range, t->get("evict_after_s") ? t->get("evict_after_s") : t->get("heartbeat_s"),
               "evict_after_s", "must be at least twice heartbeat_s");
    }
    read_table(top, "reward", k::reward_keys(), c.reward, source);
    read_table(top, "tokens", k::tokens_keys(), c.tokens, source);
    if (const toml::table* t = read_table(top, "tls", k::tls_keys(), c.tls, source)) {
      TableReader r(*t, "tls", source);
      if (c.tls.enabled() && (c.tls.certificate.empty() || c.tls.key.empty() || c.tls.ca.empty()))
        r.fail(Errc::config_missing, nullptr, "certificate",
               "TLS needs all three of certificate, key and ca (or none of them)");
    }
    if (const toml::table* t = read_table(top, "autoscale", k::autoscale_keys(), c.autoscale, source)) {
      TableReader r(*t, "autoscale", source);
      if (c.autoscale.max_explorers < c.autoscale.min_explorers)
        r.fail(Errc::config_range, t->get("max_explorers") ? t->get("max_explorers") : t->get("min_explorers"),
               "max_explorers", "must be at least min_explorers");
    }
    if (const toml::node* n = top.find("node")) {
      const toml::array* nodes = n->as_array();
      if (!nodes || !nodes->is_array_of_tables())
        top.fail(Errc::config_type, n, "node", "expected [[node]] tables");
      std::set<std::string> names;
      for (std::size_t i = 0; i < nodes->size(); ++i) {
        const toml::table& nt = *nodes->get(i)->as_table();
        TableReader r(nt, "node[" + std::to_string(i) + "]", source);
        NodeConfig node;
        k::read_section(r, k::node_keys(), node);
        if (node.name.empty()) r.fail(Errc::config_missing, nullptr, "name", "every [[node]] needs a non-empty name");
        if (!names.insert(node.name).second)
          r.fail(Errc::config_range, nt.get("name"), "name", "node names must be unique");
        if (node.learner_ranks > 0 && node.launcher == Launcher::slurm)
          r.fail(Errc::config_range, nt.get("learner_ranks"), "learner_ranks",
                 "learner ranks start with the run (every rank must join within the group timeout), which a Slurm "
                 "queue cannot promise: place them on a node started by ssh or locally");
        c.nodes.push_back(node);
      }
    }
    top.reject_unknown(
        {"run", "policy", "learner", "explorer", "weight_store", "record", "external", "log", "launch", "reward", "tokens", "tls",
         "autoscale", "node", "metrics", "alerts", "gateway"});

    // Whole-topology checks.
    auto count_role = [&](const std::string& role) {
      int k = 0;
      for (const auto& node : c.nodes)
        k += static_cast<int>(std::count(node.actors.begin(), node.actors.end(), role));
      return k;
    };
    const toml::node* node_at = root.get("node");
    for (const char* role : {"coordinator", "learner", "weight_store", "recorder"}) {
      if (count_role(role) != 1)
        top.fail(Errc::config_range, node_at, "node",
                 std::string("exactly one node must list \"") + role + "\" in actors, found " +
                     std::to_string(count_role(role)));
    }
    for (const auto& node : c.nodes)
      if (!node.actors.empty() && node.actors.size() != 4)
        top.fail(Errc::config_range, node_at, "node",
                 "node '" + node.name + "': coordinator, learner, weight_store and recorder run on one node (the "
                 "head); found only some of them on this one");
    if (c.total_explorers() < 1)
      top.fail(Errc::config_range, node_at, "node", "the topology needs at least one explorer");
    std::int64_t placed = 0;
    for (const auto& node : c.nodes) placed += node.learner_ranks;
    if (placed > 0 && placed != c.learner.ranks - 1)
      top.fail(Errc::config_range, node_at, "node.learner_ranks",
               "the nodes' learner_ranks add up to " + std::to_string(placed) + ", but [learner] ranks = " +
                   std::to_string(c.learner.ranks) + " makes " + std::to_string(c.learner.ranks - 1) +
                   " rank processes (rank 0 is the head's learner actor); without learner_ranks they all run on "
                   "the head");
    if (c.run.mode == RunMode::sync && c.autoscale.enabled)
      top.fail(Errc::config_range, root.get("autoscale"), "autoscale.enabled",
               "a sync run has a fixed set of explorers (batch_segments x ranks): autoscaling is for async runs");
    if (c.run.mode == RunMode::sync && c.learner.batch_segments * c.learner.ranks != c.total_explorers())
      top.fail(Errc::config_range, root.get("learner"), "learner.batch_segments",
               "in sync mode batch_segments x ranks must equal the number of explorers (" +
                   std::to_string(c.total_explorers()) + "), got " + std::to_string(c.learner.batch_segments) +
                   " x " + std::to_string(c.learner.ranks));
    // The token policy and its env go together.
    const bool token_policy = c.policy.kind == PolicyKind::moe_transformer;
    if (c.learner.algorithm == Algorithm::vtrace && c.learner.correction == Correction::none)
      top.fail(Errc::config_range, root.get("learner"), "learner.correction",
               "\"none\" applies to ppo and grpo: V-trace corrects through its own truncated ratios (rho_bar, c_bar); "
               "remove the key or set it to \"decoupled\"");
    if (token_policy != c.token_run())
      top.fail(Errc::config_range, root.get("policy"), "policy.kind",
               token_policy ? "the moe_transformer policy needs a token env (run.env = \"tokens:arithmetic\" or "
                              "\"tokens:code\")"
                            : "a token env (\"" + c.run.env + "\") needs policy.kind = \"moe_transformer\"");
    if (c.token_run()) {
      if (c.learner.algorithm == Algorithm::vtrace)
        top.fail(Errc::config_range, root.get("learner"), "learner.algorithm",
                 "the token policy trains with \"grpo\" or \"ppo\"");
      for (const auto& node : c.nodes)
        if (node.explorers > 0 && node.envs_per_explorer % c.tokens.group_size != 0)
          top.fail(Errc::config_range, root.get("tokens"), "tokens.group_size",
                   "must divide envs_per_explorer (the rows an explorer decodes together), got " +
                       std::to_string(node.envs_per_explorer) + " on node " + node.name);
      if (c.tokens.max_new_tokens >= c.policy.max_len)
        top.fail(Errc::config_range, root.get("tokens"), "tokens.max_new_tokens",
                 "must leave room for the prompt below policy.max_len (" + std::to_string(c.policy.max_len) + ")");
      if (c.run.env == "tokens:code" && c.reward.scorer != "code")
        top.fail(Errc::config_range, root.get("reward"), "reward.scorer",
                 "code tasks are scored by running the program: set [reward] scorer = \"code\"");
      const bool workspace = c.run.env == "tokens:workspace";
      if (workspace && c.reward.scorer != "workspace")
        top.fail(Errc::config_range, root.get("reward"), "reward.scorer",
                 "workspace episodes are scored by the hidden tests: set [reward] scorer = \"workspace\"");
      if (!workspace && c.reward.scorer == "workspace")
        top.fail(Errc::config_range, root.get("reward"), "reward.scorer",
                 "\"workspace\" scores an agent's changed files for a workspace task (docs/workspace.md); " + c.run.env +
                     " episodes are not those");
      if (c.policy.copy_head && c.policy.dtype != WeightDType::f32)
        top.fail(Errc::config_range, root.get("policy"), "policy.dtype",
                 "a copy head computes in fp32 (policy.copy_head = true): set dtype = \"f32\" or drop the copy head");
      if (!c.policy.init_adapter.empty() && (c.policy.lora.rank == 0 || !c.policy.init_adapter.starts_with("peft:")))
        top.fail(Errc::config_range, root.get("policy"), "policy.init_adapter",
                 c.policy.lora.rank == 0
                     ? "starts adapters: it needs [policy.lora] with a rank"
                     : "names a PEFT adapter's folder as \"peft:DIR\", got \"" + c.policy.init_adapter + "\"");
      if (c.policy.lora.rank > 0 && c.policy.init.empty())
        top.fail(Errc::config_range, root.get("policy"), "policy.lora.rank",
                 "adapters train over a frozen base read from policy.init: set it to \"hf:DIR\" (a Hugging Face "
                 "checkpoint, e.g. made by `rlx init-model --hf`) or to weights `rlx sft --out` wrote, or set "
                 "rank = 0 to train every weight");
      if (c.run.env == "tokens:gateway" && c.tokens.eval_tasks > 0)
        top.fail(Errc::config_range, root.get("tokens"), "tokens.eval_tasks",
                 "a gateway run's tasks are its harnesses' (docs/gateway.md): there is no held-out set to draw here; "
                 "set eval_tasks = 0 and evaluate in the harness");
      if (!workspace && c.tokens.edit_names != "free")
        top.fail(Errc::config_range, root.get("tokens"), "tokens.edit_names",
                 "names in edits come from the context only in workspace episodes (tokens:workspace; "
                 "docs/workspace.md \"Names in edits\"); " + c.run.env + " has no edits");
      if (!workspace && c.tokens.bad_call_cost != 0.0)
        top.fail(Errc::config_range, root.get("tokens"), "tokens.bad_call_cost",
                 "only workspace episodes (tokens:workspace) make tool calls to refuse; " + c.run.env + " has none");
      if (workspace && c.tokens.turn_tokens > c.tokens.max_new_tokens)
        top.fail(Errc::config_range, root.get("tokens"), "tokens.turn_tokens",
                 "a turn cannot be longer than the episode's budget (max_new_tokens = " +
                     std::to_string(c.tokens.max_new_tokens) + ")");
    } else if (c.learner.algorithm == Algorithm::grpo) {
      top.fail(Errc::config_range, root.get("learner"), "learner.algorithm",
               "grpo needs the token policy (groups of samples of one task)");
    } else if (c.learner.kl_coef != 0.0) {
      top.fail(Errc::config_range, root.get("learner"), "learner.kl_coef",
               "a KL to the start weights is the token policy's (policy.kind = \"moe_transformer\")");
    } else if (c.policy.dtype != WeightDType::f32) {
      top.fail(Errc::config_range, root.get("policy"), "policy.dtype",
               "bf16 weights are the token policy's (policy.kind = \"moe_transformer\")");
    } else if (c.policy.lora.rank > 0) {
      top.fail(Errc::config_range, root.get("policy"), "policy.lora.rank",
               "adapters are the token policy's (policy.kind = \"moe_transformer\")");
    }
  } catch (const ConfigFailure& f) {
    return f.error;
  }
  return c;
}

Result<ClusterConfig> load_config(const std::string& path, const std::vector<std::string>& known_envs,
                                  const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) return make_error(Errc::io, path + ": cannot open the topology file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = parse_config(ss.str(), path, known_envs, overrides);
  if (!c) return c;
  resolve_topology_paths(*c, std::filesystem::absolute(path).parent_path());
  // A Hugging Face checkpoint brings its own vocabulary: with `[policy]
  // init = "hf:DIR"` and no [tokens] tokenizer, DIR/tokenizer.json when
  // there is one (else the characters).
  if (c->tokens.tokenizer.empty() && c->policy.init.starts_with("hf:")) {
    const auto file = std::filesystem::path(c->policy.init.substr(3)) / "tokenizer.json";
    if (std::error_code ec; std::filesystem::is_regular_file(file, ec))
      c->tokens.tokenizer = std::filesystem::absolute(file).lexically_normal().string();
  }
  return c;
}

}  // namespace rlx
