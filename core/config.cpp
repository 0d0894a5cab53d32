#include "core/config.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace rlx {
namespace {

// Thrown inside the parser only; parse_config turns it into an Error.
struct ConfigFailure {
  Error error;
};

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string show(const toml::node& n) {
  std::ostringstream os;
  if (n.is_string())
    os << '"' << *n.value<std::string>() << '"';
  else if (n.is_array() || n.is_table())
    os << (n.is_array() ? "an array" : "a table");
  else
    n.visit([&](auto&& v) { os << v; });
  return os.str();
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

// Reads the keys of one table, remembering which it consumed so unknown
// keys (usually typos) are reported.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix, std::string_view source)
      : table_(table), prefix_(std::move(prefix)), source_(source) {}

  [[noreturn]] void fail(Errc code, const toml::node* at, const std::string& key,
                         const std::string& what) const {
    const auto& src = at ? at->source() : table_.source();
    std::ostringstream os;
    os << source_ << ":" << src.begin.line << ":" << src.begin.column << ": key '" << qualified(key)
       << "'";
    if (at && code != Errc::config_unknown_key) os << " = " << show(*at);
    os << ": " << what;
    throw ConfigFailure{make_error(code, os.str())};
  }

  std::string qualified(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const toml::node* find(const std::string& key) {
    seen_.insert(key);
    return table_.get(key);
  }

  void string(const std::string& key, std::string& out, const std::vector<std::string>& allowed = {},
              Errc unknown = Errc::config_range) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_string()) fail(Errc::config_type, n, key, std::string("expected a string, got ") + type_name(*n));
    std::string v = *n->value<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end())
      fail(unknown, n, key, "allowed: " + join(allowed));
    out = v;
  }

  void boolean(const std::string& key, bool& out) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_boolean()) fail(Errc::config_type, n, key, std::string("expected a boolean, got ") + type_name(*n));
    out = *n->value<bool>();
  }

  template <class Int>
  void integer(const std::string& key, Int& out, std::int64_t lo, std::int64_t hi) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_integer()) fail(Errc::config_type, n, key, std::string("expected an integer, got ") + type_name(*n));
    std::int64_t v = *n->value<std::int64_t>();
    if (v < lo || v > hi)
      fail(Errc::config_range, n, key, "allowed: integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<Int>(v);
  }

  // A number in [lo, hi] (or (lo, hi] when `lo_open`); integers are accepted.
  void number(const std::string& key, double& out, double lo, double hi, bool lo_open = false) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_number()) fail(Errc::config_type, n, key, std::string("expected a number, got ") + type_name(*n));
    double v = n->is_integer() ? static_cast<double>(*n->value<std::int64_t>()) : *n->value<double>();
    bool below = lo_open ? v <= lo : v < lo;
    if (below || v > hi || v != v) {
      std::ostringstream os;
      os << "allowed: numbers in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
      fail(Errc::config_range, n, key, os.str());
    }
    out = v;
  }

  void strings(const std::string& key, std::vector<std::string>& out, const std::vector<std::string>& allowed) {
    const toml::node* n = find(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) fail(Errc::config_type, n, key, std::string("expected an array of strings, got ") + type_name(*n));
    out.clear();
    for (const auto& item : *a) {
      if (!item.is_string()) fail(Errc::config_type, &item, key, "expected an array of strings");
      std::string v = *item.value<std::string>();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end())
        fail(Errc::config_unknown_name, &item, key, "allowed: " + join(allowed));
      out.push_back(v);
    }
  }

  const toml::table* table(const std::string& key) {
    const toml::node* n = find(key);
    if (!n) return nullptr;
    if (!n->is_table()) fail(Errc::config_type, n, key, std::string("expected a table, got ") + type_name(*n));
    return n->as_table();
  }

  // Reports the first key that no reader asked for.
  void reject_unknown(const std::vector<std::string>& known_hint) const {
    for (const auto& [k, v] : table_) {
      std::string key(k.str());
      if (!seen_.count(key)) {
        std::vector<std::string> sorted(known_hint);
        fail(Errc::config_unknown_key, &v, key, "unknown key; known keys here: " + join(sorted));
      }
    }
  }

  const std::set<std::string>& seen() const { return seen_; }

 private:
  const toml::table& table_;
  std::string prefix_;
  std::string_view source_;
  std::set<std::string> seen_;
};

std::vector<std::string> seen_list(const TableReader& r) { return {r.seen().begin(), r.seen().end()}; }

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// "cpu", "cuda" or "cuda:N" (whether this build and machine have CUDA is
// checked when the learner starts: Trainer's check_device).
bool valid_device_name(const std::string& d) {
  if (d == "cpu" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 8) return false;
  return std::all_of(d.begin() + 5, d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void read_run(TableReader& r, RunConfig& c, const std::vector<std::string>& envs) {
  r.string("name", c.name);
  r.integer("seed", c.seed, 0, std::numeric_limits<std::int64_t>::max());
  r.string("env", c.env);
  const bool exec = c.env.rfind("exec:", 0) == 0;
  const bool tokens = c.env == "tokens:arithmetic" || c.env == "tokens:code";
  if (exec && c.env.find_first_not_of(" \t", 5) == std::string::npos)
    r.fail(Errc::config_range, r.find("env"), "env", "\"exec:\" needs a command, e.g. \"exec:python3 env.py\"");
  if (!exec && !tokens && std::find(envs.begin(), envs.end(), c.env) == envs.end())
    r.fail(Errc::config_unknown_name, r.find("env"), "env",
           "allowed: " + join(envs) + ", \"tokens:arithmetic\", \"tokens:code\", or \"exec:COMMAND ARGS...\"");
  r.integer("max_staleness", c.max_staleness, 0, 1'000'000);
  r.string("mode", c.mode, {"async", "sync"});
  r.string("log_dir", c.log_dir);
  r.number("report_interval_s", c.report_interval_s, 0.01, 3600.0);
  r.boolean("record", c.record);
}

}  // namespace

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

Result<ClusterConfig> parse_config(std::string_view text, std::string_view source,
                                   const std::vector<std::string>& known_envs,
                                   const std::vector<std::string>& known_policies) {
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
  try {
    TableReader top(root, "", source);
    if (const toml::table* t = top.table("run")) {
      TableReader r(*t, "run", source);
      read_run(r, c.run, known_envs);
      if (const toml::table* st = r.table("stop")) {
        TableReader s(*st, "run.stop", source);
        s.number("mean_return", c.run.stop.mean_return, -1e12, 1e12);
        s.integer("max_env_steps", c.run.stop.max_env_steps, 1, std::numeric_limits<std::int64_t>::max());
        s.number("max_seconds", c.run.stop.max_seconds, 0.0, 1e9);
        s.reject_unknown({"mean_return", "max_env_steps", "max_seconds"});
      }
      r.reject_unknown({"name", "seed", "env", "max_staleness", "mode", "log_dir", "report_interval_s", "record", "stop"});
    }
    if (const toml::table* t = top.table("policy")) {
      TableReader r(*t, "policy", source);
      r.string("kind", c.policy.kind, known_policies, Errc::config_unknown_name);
      r.integer("hidden", c.policy.hidden, 1, 65536);
      r.integer("experts", c.policy.experts, 1, 1024);
      r.integer("top_k", c.policy.top_k, 1, 1024);
      r.number("load_balance_coef", c.policy.load_balance_coef, 0.0, 100.0);
      r.integer("d_model", c.policy.d_model, 1, 65536);
      r.integer("layers", c.policy.layers, 1, 256);
      r.integer("heads", c.policy.heads, 1, 256);
      r.integer("expert_hidden", c.policy.expert_hidden, 1, 1 << 20);
      r.integer("max_len", c.policy.max_len, 2, 1 << 20);
      r.number("capacity_factor", c.policy.capacity_factor, 0.0, 1000.0);
      r.number("router_z_coef", c.policy.router_z_coef, 0.0, 100.0);
      r.boolean("router_replay", c.policy.router_replay);
      r.string("init", c.policy.init);
      r.reject_unknown(seen_list(r));
      if (c.policy.d_model % c.policy.heads != 0)
        r.fail(Errc::config_range, t->get("heads"), "heads", "must divide d_model");
      if (c.policy.experts > 254)
        r.fail(Errc::config_range, t->get("experts"), "experts", "at most 254 (routes travel as one byte)");
      if (c.policy.top_k > c.policy.experts)
        r.fail(Errc::config_range, t->get("top_k"), "top_k",
               "allowed: top_k <= experts, got experts = " + std::to_string(c.policy.experts));
    }
    if (const toml::table* t = top.table("learner")) {
      TableReader r(*t, "learner", source);
      auto& l = c.learner;
      r.string("algorithm", l.algorithm, {"ppo", "vtrace", "grpo"}, Errc::config_unknown_name);
      r.string("device", l.device);
      if (!valid_device_name(l.device))
        r.fail(Errc::config_range, r.find("device"), "device", "allowed: \"cpu\", \"cuda\" or \"cuda:N\"");
      r.integer("ranks", l.ranks, 1, 64);
      r.string("collectives", l.collectives, {"auto", "gloo", "nccl"}, Errc::config_unknown_name);
      if (l.collectives == "nccl" && l.device == "cpu")
        r.fail(Errc::config_range, r.find("collectives"), "collectives",
               "nccl carries GPU tensors: it needs device = \"cuda\" or \"cuda:N\"");
      r.integer("batch_segments", l.batch_segments, 1, 1 << 20);
      r.number("lr", l.lr, 0.0, 10.0, true);
      r.integer("warmup_updates", l.warmup_updates, 0, 1 << 20);
      r.integer("publish_every", l.publish_every, 1, 1 << 20);
      r.integer("epochs", l.epochs, 1, 1000);
      r.integer("minibatches", l.minibatches, 1, 1 << 20);
      r.number("gamma", l.gamma, 0.0, 1.0);
      r.number("gae_lambda", l.gae_lambda, 0.0, 1.0);
      r.number("clip", l.clip, 0.0, 10.0, true);
      r.number("rho_bar", l.rho_bar, 0.0, 1e6, true);
      r.number("c_bar", l.c_bar, 0.0, 1e6, true);
      r.number("entropy_coef", l.entropy_coef, 0.0, 100.0);
      r.number("value_coef", l.value_coef, 0.0, 100.0);
      r.number("max_grad_norm", l.max_grad_norm, 0.0, 1e6);
      r.integer("threads", l.threads, 1, 256);
      r.integer("checkpoint_every", l.checkpoint_every, 0, 1 << 30);
      r.integer("checkpoint_keep", l.checkpoint_keep, 1, 1000);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("explorer")) {
      TableReader r(*t, "explorer", source);
      r.integer("segment_steps", c.explorer.segment_steps, 1, 1 << 16);
      r.string("env_placement", c.explorer.env_placement, {"actor", "local"});
      r.integer("threads", c.explorer.threads, 1, 256);
      r.number("reward_timeout_s", c.explorer.reward_timeout_s, 0.0, 86400.0, true);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("weight_store")) {
      TableReader r(*t, "weight_store", source);
      r.integer("keep_versions", c.weight_store.keep_versions, 1, 1 << 16);
      r.integer("chunk_kb", c.weight_store.chunk_kb, 4, 1 << 20);
      r.boolean("bulk", c.weight_store.bulk);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("record")) {
      TableReader r(*t, "record", source);
      r.integer("file_mb", c.record.file_mb, 1, 1 << 16);
      r.string("compress", c.record.compress, {"none", "zstd"});
      r.integer("compress_level", c.record.compress_level, 1, 19);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("external")) {
      TableReader r(*t, "external", source);
      r.string("protocol", c.external.protocol, {"json", "capnp"});
      if (const toml::node* a = r.find("args")) {
        const toml::array* arr = a->as_array();
        if (!arr) r.fail(Errc::config_type, a, "args", "expected an array of strings");
        for (const auto& item : *arr) {
          if (!item.is_string()) r.fail(Errc::config_type, &item, "args", "expected an array of strings");
          c.external.args.push_back(*item.value<std::string>());
        }
      }
      r.number("timeout_s", c.external.timeout_s, 0.0, 86400.0, true);
      r.integer("max_restarts", c.external.max_restarts, 0, 1'000'000);
      r.string("cwd", c.external.cwd);
      if (const toml::table* e = r.table("env")) {
        TableReader er(*e, "external.env", source);
        for (const auto& [k, v] : *e) {
          std::string value;
          er.string(std::string(k.str()), value);
          c.external.env.push_back(std::string(k.str()) + "=" + value);
        }
      }
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("log")) {
      TableReader r(*t, "log", source);
      r.string("level", c.log.level, {"trace", "debug", "info", "warn", "error", "off"});
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("launch")) {
      TableReader r(*t, "launch", source);
      r.string("ssh_command", c.launch.ssh_command);
      if (c.launch.ssh_command.find("{command}") == std::string::npos)
        r.fail(Errc::config_range, t->get("ssh_command"), "ssh_command", "must contain {command}");
      r.string("slurm_submit", c.launch.slurm_submit);
      r.strings("slurm_options", c.launch.slurm_options, {});
      r.string("rlx_binary", c.launch.rlx_binary);
      r.number("connect_timeout_s", c.launch.connect_timeout_s, 0.0, 86400.0, true);
      r.number("join_timeout_s", c.launch.join_timeout_s, 0.0, 86400.0, true);
      r.number("heartbeat_s", c.launch.heartbeat_s, 0.0, 3600.0, true);
      r.number("evict_after_s", c.launch.evict_after_s, 0.0, 86400.0, true);
      if (c.launch.evict_after_s < 2 * c.launch.heartbeat_s)
        r.fail(Errc::config_range, t->get("evict_after_s") ? t->get("evict_after_s") : t->get("heartbeat_s"),
               "evict_after_s", "must be at least twice heartbeat_s");
      r.number("reconnect_s", c.launch.reconnect_s, 0.0, 86400.0, false);
      r.boolean("listen", c.launch.listen);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("reward")) {
      TableReader r(*t, "reward", source);
      r.string("scorer", c.reward.scorer, {"arithmetic", "code"});
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("tokens")) {
      TableReader r(*t, "tokens", source);
      r.integer("group_size", c.tokens.group_size, 1, 4096);
      r.integer("max_new_tokens", c.tokens.max_new_tokens, 1, 1 << 20);
      r.number("temperature", c.tokens.temperature, 0.0, 100.0, true);
      r.number("top_p", c.tokens.top_p, 0.0, 1.0, true);
      r.integer("eval_tasks", c.tokens.eval_tasks, 0, 1 << 20);
      r.integer("eval_every", c.tokens.eval_every, 1, 1 << 20);
      r.number("hint_coef", c.tokens.hint_coef, 0.0, 100.0);
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("tls")) {
      TableReader r(*t, "tls", source);
      r.string("certificate", c.tls.certificate);
      r.string("key", c.tls.key);
      r.string("ca", c.tls.ca);
      if (c.tls.enabled() && (c.tls.certificate.empty() || c.tls.key.empty() || c.tls.ca.empty()))
        r.fail(Errc::config_missing, nullptr, "certificate",
               "TLS needs all three of certificate, key and ca (or none of them)");
      r.reject_unknown(seen_list(r));
    }
    if (const toml::table* t = top.table("autoscale")) {
      TableReader r(*t, "autoscale", source);
      r.boolean("enabled", c.autoscale.enabled);
      r.integer("min_explorers", c.autoscale.min_explorers, 1, 4096);
      r.integer("max_explorers", c.autoscale.max_explorers, 1, 4096);
      if (c.autoscale.max_explorers < c.autoscale.min_explorers)
        r.fail(Errc::config_range, t->get("max_explorers") ? t->get("max_explorers") : t->get("min_explorers"),
               "max_explorers", "must be at least min_explorers");
      r.number("interval_s", c.autoscale.interval_s, 0.0, 86400.0, true);
      r.number("idle_above", c.autoscale.idle_above, 0.0, 1.0);
      r.number("stale_above", c.autoscale.stale_above, 0.0, 1.0);
      r.reject_unknown(seen_list(r));
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
        r.string("name", node.name);
        if (node.name.empty()) r.fail(Errc::config_missing, nullptr, "name", "every [[node]] needs a non-empty name");
        if (!names.insert(node.name).second)
          r.fail(Errc::config_range, nt.get("name"), "name", "node names must be unique");
        r.string("host", node.host);
        r.integer("port", node.port, 0, 65535);
        r.strings("actors", node.actors, {"coordinator", "learner", "weight_store", "recorder"});
        r.integer("explorers", node.explorers, 0, 4096);
        r.integer("envs_per_explorer", node.envs_per_explorer, 1, 1 << 16);
        r.integer("rewards", node.rewards, 0, 4096);
        r.integer("learner_ranks", node.learner_ranks, 0, 63);
        r.string("launcher", node.launcher, {"local", "ssh", "slurm"});
        if (node.learner_ranks > 0 && node.launcher == "slurm")
          r.fail(Errc::config_range, nt.get("learner_ranks"), "learner_ranks",
                 "learner ranks start with the run (every rank must join within the group timeout), which a Slurm "
                 "queue cannot promise: place them on a node started by ssh or locally");
        r.reject_unknown(seen_list(r));
        c.nodes.push_back(node);
      }
    }
    top.reject_unknown(
        {"run", "policy", "learner", "explorer", "weight_store", "record", "external", "log", "launch", "reward", "tokens", "tls",
         "autoscale", "node"});

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
    if (c.run.mode == "sync" && c.autoscale.enabled)
      top.fail(Errc::config_range, root.get("autoscale"), "autoscale.enabled",
               "a sync run has a fixed set of explorers (batch_segments x ranks): autoscaling is for async runs");
    if (c.run.mode == "sync" && c.learner.batch_segments * c.learner.ranks != c.total_explorers())
      top.fail(Errc::config_range, root.get("learner"), "learner.batch_segments",
               "in sync mode batch_segments x ranks must equal the number of explorers (" +
                   std::to_string(c.total_explorers()) + "), got " + std::to_string(c.learner.batch_segments) +
                   " x " + std::to_string(c.learner.ranks));
    // The token policy and its env go together.
    const bool token_policy = c.policy.kind == "moe_transformer";
    if (token_policy != c.token_run())
      top.fail(Errc::config_range, root.get("policy"), "policy.kind",
               token_policy ? "the moe_transformer policy needs a token env (run.env = \"tokens:arithmetic\" or "
                              "\"tokens:code\")"
                            : "a token env (\"" + c.run.env + "\") needs policy.kind = \"moe_transformer\"");
    if (c.token_run()) {
      if (c.learner.algorithm == "vtrace")
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
    } else if (c.learner.algorithm == "grpo") {
      top.fail(Errc::config_range, root.get("learner"), "learner.algorithm",
               "grpo needs the token policy (groups of samples of one task)");
    }
  } catch (const ConfigFailure& f) {
    return f.error;
  }
  return c;
}

Result<ClusterConfig> load_config(const std::string& path, const std::vector<std::string>& known_envs,
                                  const std::vector<std::string>& known_policies) {
  std::ifstream in(path);
  if (!in) return make_error(Errc::io, path + ": cannot open the topology file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, known_envs, known_policies);
}

}  // namespace rlx
