#include "core/config_keys.hpp"

namespace rlx::config_keys {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
const std::vector<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};

template <class S>
void describe(std::vector<KeyInfo>& out, const std::string& section, const std::vector<Key<S>>& keys) {
  const S defaults{};
  const toml::table written = write_section(keys, defaults);
  for (const auto& k : keys) {
    KeyInfo info;
    info.section = section;
    info.name = k.name;
    info.kind = k.kind;
    info.allowed = k.allowed;
    info.required = k.required;
    if (const toml::node* v = written.get(k.name)) info.default_value.insert("v", *v);
    out.push_back(std::move(info));
  }
}

}  // namespace

const std::vector<Key<RunConfig>>& run_keys() {
  using S = RunConfig;
  static const std::vector<Key<S>> keys = {
      text("name", &S::name),
      whole("seed", &S::seed, 0, kInt64Max),
      text("env", &S::env),  // a registry name, "exec:..." or "tokens:...": checked in parse_config
      whole("max_staleness", &S::max_staleness, 0, 1'000'000),
      choice("mode", &S::mode),
      text("log_dir", &S::log_dir),
      real("report_interval_s", &S::report_interval_s, 0.01, 3600.0),
      flag("record", &S::record),
      subtable<S>("stop"),
  };
  return keys;
}

const std::vector<Key<StopConfig>>& stop_keys() {
  using S = StopConfig;
  static const std::vector<Key<S>> keys = {
      real("mean_return", &S::mean_return, -1e12, 1e12),
      whole("max_env_steps", &S::max_env_steps, 1, kInt64Max),
      real("max_seconds", &S::max_seconds, 0.0, 1e9),
      whole("max_updates", &S::max_updates, 0, kInt64Max),
  };
  return keys;
}

const std::vector<Key<PolicyConfig>>& policy_keys() {
  using S = PolicyConfig;
  static const std::vector<Key<S>> keys = {
      choice("kind", &S::kind, Errc::config_unknown_name),
      whole("hidden", &S::hidden, 1, 65536),
      whole("experts", &S::experts, 1, 1024),
      whole("top_k", &S::top_k, 1, 1024),
      real("load_balance_coef", &S::load_balance_coef, 0.0, 100.0),
      whole("d_model", &S::d_model, 1, 65536),
      whole("layers", &S::layers, 1, 256),
      whole("heads", &S::heads, 1, 256),
      whole("expert_hidden", &S::expert_hidden, 1, 1 << 20),
      whole("max_len", &S::max_len, 2, 1 << 20),
      real("capacity_factor", &S::capacity_factor, 0.0, 1000.0),
      real("router_z_coef", &S::router_z_coef, 0.0, 100.0),
      flag("router_replay", &S::router_replay),
      flag("copy_head", &S::copy_head),
      text("init", &S::init),
      choice("dtype", &S::dtype),
      subtable<S>("lora"),
      text("init_adapter", &S::init_adapter),
  };
  return keys;
}

const std::vector<Key<LoraConfig>>& lora_keys() {
  using S = LoraConfig;
  static const std::vector<Key<S>> keys = {
      whole("rank", &S::rank, 0, 4096),
      real("alpha", &S::alpha, 0.0, 1e6, true),
      texts("targets", &S::targets,
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "experts", "lm_head", "qkv"}),
      flag("router", &S::router),
  };
  return keys;
}

const std::vector<Key<LearnerConfig>>& learner_keys() {
  using S = LearnerConfig;
  static const std::vector<Key<S>> keys = {
      choice("algorithm", &S::algorithm, Errc::config_unknown_name),
      text("device", &S::device),  // "cpu", "cuda" or "cuda:N": checked in parse_config
      whole("ranks", &S::ranks, 1, 64),
      choice("collectives", &S::collectives, Errc::config_unknown_name),
      whole("batch_segments", &S::batch_segments, 1, 1 << 20),
      real("lr", &S::lr, 0.0, 10.0, true),
      whole("warmup_updates", &S::warmup_updates, 0, 1 << 20),
      whole("publish_every", &S::publish_every, 1, 1 << 20),
      whole("epochs", &S::epochs, 1, 1000),
      whole("minibatches", &S::minibatches, 1, 1 << 20),
      real("gamma", &S::gamma, 0.0, 1.0),
      real("gae_lambda", &S::gae_lambda, 0.0, 1.0),
      real("clip", &S::clip, 0.0, 10.0, true),
      real("rho_bar", &S::rho_bar, 0.0, 1e6, true),
      choice("correction", &S::correction, Errc::config_unknown_name),
      real("c_bar", &S::c_bar, 0.0, 1e6, true),
      real("entropy_coef", &S::entropy_coef, 0.0, 100.0),
      real("kl_coef", &S::kl_coef, 0.0, 100.0),
      real("value_coef", &S::value_coef, 0.0, 100.0),
      real("max_grad_norm", &S::max_grad_norm, 0.0, 1e6),
      whole("threads", &S::threads, 1, 256),
      whole("checkpoint_every", &S::checkpoint_every, 0, 1 << 30),
      whole("checkpoint_keep", &S::checkpoint_keep, 1, 1000),
  };
  return keys;
}

const std::vector<Key<ExplorerConfig>>& explorer_keys() {
  using S = ExplorerConfig;
  static const std::vector<Key<S>> keys = {
      whole("segment_steps", &S::segment_steps, 1, 1 << 16),
      choice("env_placement", &S::env_placement),
      whole("threads", &S::threads, 1, 256),
      real("reward_timeout_s", &S::reward_timeout_s, 0.0, 86400.0, true),
  };
  return keys;
}

const std::vector<Key<WeightStoreConfig>>& weight_store_keys() {
  using S = WeightStoreConfig;
  static const std::vector<Key<S>> keys = {
      whole("keep_versions", &S::keep_versions, 1, 1 << 16),
      whole("chunk_kb", &S::chunk_kb, 4, 1 << 20),
      flag("bulk", &S::bulk),
      flag("deltas", &S::deltas),
      whole("max_set_mb", &S::max_set_mb, 0, std::int64_t{1} << 30),
  };
  return keys;
}

const std::vector<Key<RecordConfig>>& record_keys() {
  using S = RecordConfig;
  static const std::vector<Key<S>> keys = {
      whole("file_mb", &S::file_mb, 1, 1 << 16),
      text("compress", &S::compress, {"none", "zstd"}),
      whole("compress_level", &S::compress_level, 1, 19),
      choice("on_error", &S::on_error),
  };
  return keys;
}

const std::vector<Key<ExternalEnvConfig>>& external_keys() {
  using S = ExternalEnvConfig;
  static const std::vector<Key<S>> keys = {
      choice("protocol", &S::protocol),
      texts("args", &S::args),
      real("timeout_s", &S::timeout_s, 0.0, 86400.0, true),
      whole("max_restarts", &S::max_restarts, 0, 1'000'000),
      text("cwd", &S::cwd),
      subtable<S>("env"),  // KEY = "VALUE" strings: read in parse_config
  };
  return keys;
}

const std::vector<Key<LogConfig>>& log_keys() {
  using S = LogConfig;
  static const std::vector<Key<S>> keys = {text("level", &S::level, kLevels)};
  return keys;
}

const std::vector<Key<MetricsConfig>>& metrics_keys() {
  using S = MetricsConfig;
  static const std::vector<Key<S>> keys = {
      flag("prometheus", &S::prometheus),
      flag("page", &S::page),
      text("host", &S::host),
      whole("port", &S::port, 0, 65535),
      flag("tensorboard", &S::tensorboard),
  };
  return keys;
}

const std::vector<Key<AlertsConfig>>& alerts_keys() {
  using S = AlertsConfig;
  static const std::vector<Key<S>> keys = {
      text("webhook", &S::webhook),  // a URL: checked in parse_config
      real("stall_s", &S::stall_s, 0.0, 1e7),
      real("infra_failures_per_min", &S::infra_failures_per_min, 0.0, 1e9),
      real("min_interval_s", &S::min_interval_s, 0.0, 1e7),
      real("timeout_s", &S::timeout_s, 0.1, 600.0),
  };
  return keys;
}

const std::vector<Key<GatewayConfig>>& gateway_keys() {
  using S = GatewayConfig;
  static const std::vector<Key<S>> keys = {
      text("host", &S::host),
      whole("port", &S::port, 0, 65535),
      text("token_file", &S::token_file),
      real("session_timeout_s", &S::session_timeout_s, 0.0, 1e7, true),
      real("turn_timeout_s", &S::turn_timeout_s, 0.0, 86400.0, true),
      whole("max_queued_turns", &S::max_queued_turns, 1, 1 << 20),
      whole("threads", &S::threads, 1, 4096),
  };
  return keys;
}

const std::vector<Key<LaunchConfig>>& launch_keys() {
  using S = LaunchConfig;
  static const std::vector<Key<S>> keys = {
      text("ssh_command", &S::ssh_command),  // must hold {command}: checked in parse_config
      text("slurm_submit", &S::slurm_submit),
      texts("slurm_options", &S::slurm_options),
      text("rlx_binary", &S::rlx_binary),
      real("connect_timeout_s", &S::connect_timeout_s, 0.0, 86400.0, true),
      real("join_timeout_s", &S::join_timeout_s, 0.0, 86400.0, true),
      real("heartbeat_s", &S::heartbeat_s, 0.0, 3600.0, true),
      real("evict_after_s", &S::evict_after_s, 0.0, 86400.0, true),
      real("reconnect_s", &S::reconnect_s, 0.0, 86400.0),
      flag("listen", &S::listen),
      real("stranger_timeout_s", &S::stranger_timeout_s, 0.0, 3600.0, true),
  };
  return keys;
}

const std::vector<Key<RewardConfig>>& reward_keys() {
  using S = RewardConfig;
  static const std::vector<Key<S>> keys = {text("scorer", &S::scorer, {"arithmetic", "code", "workspace"}),
                                           whole("retries", &S::retries, 0, 100)};
  return keys;
}

const std::vector<Key<TokensConfig>>& tokens_keys() {
  using S = TokensConfig;
  static const std::vector<Key<S>> keys = {
      whole("group_size", &S::group_size, 1, 4096),
      whole("max_new_tokens", &S::max_new_tokens, 1, 1 << 20),
      real("temperature", &S::temperature, 0.0, 100.0, true),
      real("top_p", &S::top_p, 0.0, 1.0, true),
      whole("eval_tasks", &S::eval_tasks, 0, 1 << 20),
      whole("eval_every", &S::eval_every, 1, 1 << 20),
      real("hint_coef", &S::hint_coef, 0.0, 100.0),
      whole("difficulty", &S::difficulty, 0, 3),
      whole("max_turns", &S::max_turns, 1, 1000),
      whole("turn_tokens", &S::turn_tokens, 1, 1 << 20),
      real("bad_call_cost", &S::bad_call_cost, 0.0, 1.0),
      text("edit_names", &S::edit_names, {"free", "context"}),
      text("tokenizer", &S::tokenizer),
  };
  return keys;
}

const std::vector<Key<TlsConfig>>& tls_keys() {
  using S = TlsConfig;
  static const std::vector<Key<S>> keys = {text("certificate", &S::certificate), text("key", &S::key),
                                           text("ca", &S::ca)};
  return keys;
}

const std::vector<Key<AutoscaleConfig>>& autoscale_keys() {
  using S = AutoscaleConfig;
  static const std::vector<Key<S>> keys = {
      flag("enabled", &S::enabled),
      whole("min_explorers", &S::min_explorers, 1, 4096),
      whole("max_explorers", &S::max_explorers, 1, 4096),
      real("interval_s", &S::interval_s, 0.0, 86400.0, true),
      real("idle_above", &S::idle_above, 0.0, 1.0),
      real("stale_above", &S::stale_above, 0.0, 1.0),
  };
  return keys;
}

const std::vector<Key<NodeConfig>>& node_keys() {
  using S = NodeConfig;
  static const std::vector<Key<S>> keys = [] {
    std::vector<Key<S>> k = {
        text("name", &S::name),
        text("host", &S::host),
        whole("port", &S::port, 0, 65535),
        texts("actors", &S::actors, {"coordinator", "learner", "weight_store", "recorder"}),
        whole("explorers", &S::explorers, 0, 4096),
        whole("envs_per_explorer", &S::envs_per_explorer, 1, 1 << 16),
        whole("rewards", &S::rewards, 0, 4096),
        whole("learner_ranks", &S::learner_ranks, 0, 63),
        choice("launcher", &S::launcher),
    };
    k.front().required = true;
    return k;
  }();
  return keys;
}

std::vector<KeyInfo> all_keys() {
  std::vector<KeyInfo> out;
  describe(out, "run", run_keys());
  describe(out, "run.stop", stop_keys());
  describe(out, "policy", policy_keys());
  describe(out, "policy.lora", lora_keys());
  describe(out, "tokens", tokens_keys());
  describe(out, "learner", learner_keys());
  describe(out, "explorer", explorer_keys());
  describe(out, "weight_store", weight_store_keys());
  describe(out, "record", record_keys());
  describe(out, "external", external_keys());
  describe(out, "log", log_keys());
  describe(out, "metrics", metrics_keys());
  describe(out, "alerts", alerts_keys());
  describe(out, "gateway", gateway_keys());
  describe(out, "launch", launch_keys());
  describe(out, "autoscale", autoscale_keys());
  describe(out, "reward", reward_keys());
  describe(out, "tls", tls_keys());
  describe(out, "node", node_keys());
  return out;
}

}  // namespace rlx::config_keys
