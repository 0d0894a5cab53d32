// Typed configuration of a run, parsed from cluster.toml in one place
// (config.cpp). Each component gets its own struct; every field has its
// default inline. docs/topology.md documents every key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/choices.hpp"
#include "core/error.hpp"

namespace rlx {

// [run.stop]: the run stops at the first condition met.
struct StopConfig {
  double mean_return = 475.0;        // mean return of the last 100 episodes
  std::uint64_t max_env_steps = 2'000'000;  // env steps received by the learner
  double max_seconds = 0.0;          // wall-clock limit; 0 = none
  std::uint64_t max_updates = 0;     // policy versions published by the learner; 0 = none
};

// [policy.lora]: low-rank adapters over a frozen base (docs/hf-models.md "LoRA").
struct LoraConfig {
  std::int64_t rank = 0;  // 0: no adapters, every parameter trained
  double alpha = 16;      // an adapter's output is scaled by alpha / rank (PEFT's lora_alpha)
  // PEFT's module names: q_proj k_proj v_proj o_proj (attention), gate_proj
  // up_proj down_proj (a dense layer's MLP), experts (every routed expert's three), lm_head;
  // RLX's own layout: qkv (its attention's fused q, k, v), o_proj, experts, lm_head
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  bool router = false;  // train the MoE routers too (otherwise frozen with the base)
};

// [run]
struct RunConfig {
  std::string name = "cartpole";     // run name, used in logs
  std::uint64_t seed = 1;            // base seed of every RNG
  std::string env = "cartpole";      // environment registry name, or "exec:COMMAND ARGS..."
  std::uint64_t max_staleness = 4;   // policy versions a segment may lag
  RunMode mode = RunMode::async;     // async | sync (explorers wait for every version)
  std::string log_dir = "runs/cartpole";  // metrics.jsonl, rollouts/ go here
  double report_interval_s = 1.0;    // metrics.jsonl and status line period
  bool record = true;                // write the rollout log
  StopConfig stop;
};

// [policy]
struct PolicyConfig {
  PolicyKind kind = PolicyKind::moe_mlp;  // moe_mlp | moe_transformer (the token policy: env "tokens:...")
  std::int64_t hidden = 64;          // moe_mlp: hidden width of the actor and critic
  std::int64_t experts = 4;          // experts in the MoE layer(s)
  std::int64_t top_k = 2;            // experts each token is routed to
  double load_balance_coef = 0.01;   // weight of the load-balancing loss
  // moe_transformer (policy/moe_transformer.hpp)
  std::int64_t d_model = 128;
  std::int64_t layers = 2;
  std::int64_t heads = 4;
  std::int64_t expert_hidden = 256;
  std::int64_t max_len = 256;        // prompt + completion positions
  double capacity_factor = 0;        // 0: no token dropped
  double router_z_coef = 1e-3;
  bool router_replay = false;        // the learner trains through the routes the rollout recorded
  bool copy_head = false;            // a pointer at the context mixed into the logits (policy/copy_head.hpp)
  std::string init;                  // weights to start from (`rlx sft --out`); empty: fresh
  // moe_transformer: what the weights are held in outside the learner
  // (explorers, evaluator, gateway, weight sets) and what the learner
  // computes in; the learner keeps fp32 master weights (docs/hf-models.md).
  WeightDType dtype = WeightDType::f32;
  LoraConfig lora;           // [policy.lora]
  std::string init_adapter;  // with lora: "peft:DIR", the adapters to start from (`rlx export --peft`)
};

// [tokens]: the token policy's tasks and sampling (env "tokens:KIND").
struct TokensConfig {
  std::int64_t group_size = 8;       // samples per task (GRPO's group); divides envs_per_explorer
  std::int64_t max_new_tokens = 80;
  double temperature = 1.0;
  double top_p = 1.0;
  std::int64_t eval_tasks = 64;      // held-out tasks the evaluator scores (0: no evaluator)
  std::int64_t eval_every = 5;       // versions between evaluations (the newest is scored)
  double hint_coef = 0.0;            // weight of the hint distillation loss (0: off; docs/token-policy.md)
  // Agent episodes (tokens:workspace; docs/workspace.md): max_new_tokens is
  // the whole episode's budget after the prompt, turns and observations.
  std::int64_t difficulty = 1;       // function bodies removed per task (1-3; 0: one body of one operation)
  std::int64_t max_turns = 12;       // turns without a submit end the episode
  std::int64_t turn_tokens = 200;    // a turn cut at this many tokens (its call is then bad)
  // Taken from an episode's reward for each turn whose call could not run
  // (docs/workspace.md "A cost on refused calls"; 0: none). Training only:
  // the evaluator's pass@1 is the hidden tests' alone.
  double bad_call_cost = 0.0;
  // Names in the bodies of the policy's edits (docs/workspace.md "Names in
  // edits"): "free" (any text), or "context": a decoding rule, in the
  // explorers and the evaluator as in the learner, lets an edit's
  // identifiers be only names the episode has shown or Python's own.
  std::string edit_names = "free";
  // The vocabulary (envs/tokens/tokenizer.hpp): "" for characters, else a
  // subword vocabulary file (tools/train-tokenizer.sh); relative to the
  // topology's folder (core/topology_paths.hpp). The same path on every node.
  std::string tokenizer;
};

// [learner]
struct LearnerConfig {
  Algorithm algorithm = Algorithm::ppo;  // ppo | vtrace | grpo (token policy)
  std::string device = "cpu";        // cpu | cuda | cuda:N (checked against the build and machine at start)
  std::int64_t ranks = 1;            // data-parallel learner ranks (processes); rank 0 publishes
  Collectives collectives = Collectives::automatic;  // the ranks' all-reduce: auto (nccl on a GPU when built, else gloo) | gloo | nccl
  std::int64_t batch_segments = 4;   // segments per update, per rank
  double lr = 3e-3;                  // Adam learning rate
  std::int64_t warmup_updates = 0;   // the rate rises linearly to lr over the run's first N updates (0: none)
  std::int64_t publish_every = 1;    // publish weights every K updates
  std::int64_t epochs = 4;           // passes over a batch (ppo)
  std::int64_t minibatches = 4;      // minibatches per epoch (ppo)
  double gamma = 0.99;               // discount
  double gae_lambda = 0.95;          // GAE lambda (ppo)
  double clip = 0.2;                 // PPO clip epsilon
  double rho_bar = 1.0;              // truncation of the behaviour importance ratio
  // ppo, grpo: decoupled (PPO's ratio against the weights at the update's
  // start, the behaviour ratio truncated at rho_bar as a weight) | none
  // (plain PPO on stale data: the ratio against the behaviour policy)
  Correction correction = Correction::decoupled;
  double c_bar = 1.0;                // truncation of the trace coefficient (vtrace)
  double entropy_coef = 0.0;         // entropy bonus
  double kl_coef = 0.0;              // token policy: weight of KL(policy || the run's start weights) (0: off)
  double value_coef = 0.5;           // value loss weight
  double max_grad_norm = 0.5;        // gradient clipping; 0 = off
  std::int64_t threads = 1;          // LibTorch intra-op threads
  std::int64_t checkpoint_every = 25;  // write a checkpoint every N updates (0 = never)
  std::int64_t checkpoint_keep = 3;    // checkpoints kept (the newest)
};

// [explorer]
struct ExplorerConfig {
  std::int64_t segment_steps = 64;   // T: steps per segment
  EnvPlacement env_placement = EnvPlacement::actor;  // actor (an env actor per explorer) | local (inside the explorer)
  std::int64_t threads = 1;          // LibTorch intra-op threads
  double reward_timeout_s = 30.0;    // a deferred reward not scored this long is asked of another worker
};

// [weight_store]
struct WeightStoreConfig {
  std::int64_t keep_versions = 4;    // N: versions held
  std::int64_t chunk_kb = 1024;      // weight sets cross nodes in chunks of this size (KiB)
  bool bulk = true;                  // across nodes, over the head's bulk channel (plain TCP; not with [tls])
  bool deltas = false;               // a chunk may cross as a delta against the version the node holds
  // The largest weight set a node takes (MiB); 0: the machine's memory.
  // The learner stops the run at its first publish of a larger one.
  std::int64_t max_set_mb = 0;
  std::uint64_t max_set_bytes() const;
};

// [autoscale]: the coordinator adds or removes explorers within
// [min_explorers, max_explorers] from what it measures every interval_s
// (core/autoscale.hpp; docs/cluster.md).
struct AutoscaleConfig {
  bool enabled = false;
  std::int64_t min_explorers = 1;
  std::int64_t max_explorers = 8;
  double interval_s = 10.0;          // signals are measured over this long; at most one change per interval
  double idle_above = 0.5;           // learner idle (waiting for data) above this fraction: one explorer more
  double stale_above = 0.1;          // segments dropped stale above this fraction: one explorer less
};

// [reward]: what reward workers score deferred rewards with.
struct RewardConfig {
  std::string scorer = "arithmetic";  // arithmetic | code (programs against hidden tests, in the sandbox)
  std::int64_t retries = 2;           // a reward asked again this often after a failure of the machinery, then masked
};

// [launch]: how `rlx launch` starts the nodes of a multi-node topology
// (docs/cluster.md). {host}, {node} and {command} are substituted.
struct LaunchConfig {
  std::string ssh_command = "ssh -o BatchMode=yes {host} {command}";  // for nodes with launcher = "ssh"
  std::string slurm_submit = "sbatch";  // for launcher = "slurm": run on the written script
  std::vector<std::string> slurm_options;  // extra "#SBATCH" lines, e.g. "--time=02:00:00"
  std::string rlx_binary;            // rlx on the nodes; empty = this executable's path
  double connect_timeout_s = 60.0;   // a node retries reaching the head this long
  double join_timeout_s = 120.0;     // the run fails if no explorer joined by then
  double heartbeat_s = 1.0;          // the head asks every member node this often whether it is alive
  double evict_after_s = 10.0;       // a node silent this long is evicted (its explorers counted lost)
  // A member node that lost the head keeps its explorers (paused) and
  // tries to reach a restarted head this long before it exits; 0: exits at once.
  double reconnect_s = 60.0;
  // Publish the head's gate even when the topology has one node, so that
  // `rlx scale` and `rlx node --join` can reach the run (a multi-node head
  // always listens).
  bool listen = false;
  // A connection to a port the head opens (its CAF port, the bulk channel)
  // must send its protocol's opening within this long; a stranger that
  // does not is closed and counted (docs/failures.md).
  double stranger_timeout_s = 10.0;
};

// [tls]: TLS between nodes (CAF's openssl module). All empty = plain TCP.
struct TlsConfig {
  std::string certificate;           // this node's certificate (PEM)
  std::string key;                   // its private key (PEM)
  std::string ca;                    // CA certificate peers must be signed by (PEM)
  bool enabled() const { return !certificate.empty() || !key.empty() || !ca.empty(); }
};

// [record]: the rollout log (on when [run] record = true).
struct RecordConfig {
  std::int64_t file_mb = 64;         // rotate data files at this size (MiB)
  std::string compress = "none";     // none | zstd (each file compressed whole when closed)
  std::int64_t compress_level = 3;   // zstd level 1..19
  OnRecordError on_error = OnRecordError::stop;  // a failed write: stop the run (exit 4) | continue, counting what is not recorded
};

// [[node]]
struct NodeConfig {
  std::string name;                  // unique node name
  std::string host = "127.0.0.1";    // address it listens on
  std::int64_t port = 0;             // 0 = pick a free port
  std::vector<std::string> actors;   // coordinator, learner, weight_store, recorder
  std::int64_t explorers = 0;        // explorer actors on this node
  std::int64_t envs_per_explorer = 16;  // B
  std::int64_t rewards = 0;          // reward workers on this node
  std::int64_t learner_ranks = 0;    // data-parallel learner rank processes on this node (docs/data-parallel.md)
  Launcher launcher = Launcher::local;  // local | ssh | slurm: how `rlx launch` starts this node
};

// [external]: how "exec:..." environments are run (docs/external-envs.md).
struct ExternalEnvConfig {
  std::vector<std::string> args;     // more arguments after the exec: command line (may hold spaces)
  EnvProtocol protocol = EnvProtocol::json;  // json (JSON lines) | capnp (Cap'n Proto stream framing)
  double timeout_s = 10.0;           // per request; a process silent longer is restarted
  std::int64_t max_restarts = 3;     // restarts per env process before its explorer gives up
  // Working directory of the process; empty: the topology's folder (rlx's
  // own for the embedded topology).
  std::string cwd;
  std::vector<std::string> env;      // extra environment entries, "KEY=VALUE"
};

// [metrics]: the head's HTTP endpoint (Prometheus, the live page) and
// TensorBoard curves (docs/operating.md).
struct MetricsConfig {
  bool prometheus = false;           // serve GET /metrics on the head
  bool page = false;                 // serve the live page (GET /) on the head
  std::string host = "127.0.0.1";    // address it listens on (loopback: only this machine scrapes)
  std::int64_t port = 0;             // 0 = a free port, written to <log_dir>/metrics_port
  bool tensorboard = true;           // scalars to <log_dir>/tensorboard/ (event files)
};

// [alerts]: Slack-compatible posts to a webhook when the run needs a
// person (docs/operating.md).
struct AlertsConfig {
  std::string webhook;               // http:// or https:// URL; empty: no alerts
  double stall_s = 600;              // no new policy version for this long (0: never)
  double infra_failures_per_min = 10;  // failures of the machinery past this rate (0: never)
  double min_interval_s = 300;       // the same kind of alert at most once per interval (the run's end always)
  double timeout_s = 10;             // per post; a webhook slower than this is given up on
};

// [gateway]: the OpenAI-compatible endpoint agent harnesses call when
// env = "tokens:gateway" (docs/gateway.md). The head serves it.
struct GatewayConfig {
  std::string host = "127.0.0.1";    // loopback: only this machine's harnesses
  std::int64_t port = 0;             // 0 = a free port, written to <log_dir>/gateway.json
  std::string token_file;            // the bearer token's file ("": derived from the cluster secret)
  double session_timeout_s = 600;    // a session idle this long is lost (counted, never trained)
  double turn_timeout_s = 300;       // a completion not done by then is answered 504
  std::int64_t max_queued_turns = 1024;  // more waiting: 503
  std::int64_t threads = 128;        // requests served at once
};

// [log]
struct LogConfig {
  std::string level = "info";        // trace | debug | info | warn | error | off
};

struct ClusterConfig {
  // A token policy's run (env "tokens:KIND").
  bool token_run() const { return run.env.rfind("tokens:", 0) == 0; }
  std::string source;                // file name (or "<embedded cluster.toml>")
  RunConfig run;
  PolicyConfig policy;
  LearnerConfig learner;
  ExplorerConfig explorer;
  WeightStoreConfig weight_store;
  RecordConfig record;
  MetricsConfig metrics;
  AlertsConfig alerts;
  GatewayConfig gateway;
  ExternalEnvConfig external;
  LogConfig log;
  LaunchConfig launch;
  RewardConfig reward;
  TokensConfig tokens;
  TlsConfig tls;
  AutoscaleConfig autoscale;
  std::vector<NodeConfig> nodes;

  // Sum of explorers over all nodes.
  std::int64_t total_explorers() const;
  // The node that runs the coordinator (always one, by validation).
  const NodeConfig& head() const;
  // The node called `name`, or null.
  const NodeConfig* node(const std::string& name) const;
  // True when the topology has more than one node (each is a process).
  bool multi_node() const { return nodes.size() > 1; }
  // Ids of the first explorer and first environment of `node` (explorers
  // and envs are numbered across nodes in topology order).
  std::pair<std::uint32_t, std::uint64_t> first_ids(const std::string& node) const;
  // Id of the first reward worker of `node` (numbered the same way).
  std::uint32_t first_reward_id(const std::string& node) const;
};

// Parses and validates a topology. Errors name file:line:column, the key,
// the bad value and what is allowed. `known_envs` are the env registry's
// names (passed in: no global registry).
// `overrides` are `--set KEY=VALUE` assignments (KEY dotted, as
// run.stop.max_updates; VALUE a TOML value, or a bare string), applied over
// the text before it is read; an error in one names the --set.
Result<ClusterConfig> parse_config(std::string_view text, std::string_view source,
                                   const std::vector<std::string>& known_envs,
                                   const std::vector<std::string>& overrides = {});

// The configuration as TOML (every key, defaults included):
// parse_config(to_toml(c)) gives c back. What the rollout log records and
// what learner rank processes read, so both see the effective config.
std::string to_toml(const ClusterConfig& config);

// Reads `path`, parses it with `overrides`, and makes every path it names
// absolute from the file's folder (core/topology_paths.hpp).
Result<ClusterConfig> load_config(const std::string& path, const std::vector<std::string>& known_envs,
                                  const std::vector<std::string>& overrides = {});

}  // namespace rlx
