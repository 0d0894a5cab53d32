// The rlx command line: launch (or resume) a run, run one node of it (or
// join a new node to it), scale it,
// replay and inspect rollout logs, plot metrics, run the benchmarks.
#include <CLI/CLI.hpp>

#include <optional>

#include "bench/bench.hpp"
#include "core/allocator.hpp"
#include "core/free_memory.hpp"
#include "envs/env.hpp"
#include "policy/threads.hpp"
#include "tools/corpus_cmd.hpp"
#include "tools/hf_cmd.hpp"
#include "tools/launch_cmd.hpp"
#include "tools/learner_rank.hpp"
#include "tools/replay_cmd.hpp"
#include "tools/scale_cmd.hpp"
#include "tools/serve_env.hpp"
#include "tools/sft_cmd.hpp"

namespace rlx {
const char* build_commit();  // cmake/commit.cmake
}

int main(int argc, char** argv) {
  CLI::App app{"rlx: asynchronous reinforcement learning over actors"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    return std::string("rlx ") + RLX_VERSION + " (commit " + rlx::build_commit() +
           "), memory: " + rlx::describe(rlx::current_allocator());
  });
  rlx::LaunchArgs launch_args;
  auto* launch_cmd = app.add_subcommand("launch", "run a topology to its stop condition (default: the embedded cluster.toml)");
  launch_cmd->add_option("config", launch_args.config, "a cluster.toml");
  launch_cmd->add_option("--log-level", launch_args.log_level, "trace|debug|info|warn|error|off (overrides [log] level)");
  launch_cmd->add_flag("--resume", launch_args.resume, "continue the run recorded in log_dir (the learner is rebuilt from the rollout log)");
  launch_cmd->add_flag("--resume-diverged", launch_args.resume_diverged,
                       "with --resume: go on even when the replayed learner differs from the log (refused otherwise)");
  launch_cmd->add_option("--secret-file", launch_args.secret_file, "the cluster secret, for multi-node topologies");
  launch_cmd->add_option("--set", launch_args.overrides,
                         "KEY=VALUE over the topology, e.g. --set run.stop.max_updates=5 "
                         "(repeatable; VALUE as in TOML)")
      ->allow_extra_args(false);
  launch_cmd->add_flag("--page", launch_args.page,
                       "serve the live page on the head (as [metrics] page = true; its address is logged and in <log_dir>/metrics_port)");
  rlx::NodeArgs node_args;
  auto* node_cmd = app.add_subcommand("node", "run one [[node]] of a topology (what launch starts on every host)");
  node_cmd->add_option("--config", node_args.config, "the cluster.toml (with --join: only its [tls] and [launch] are used; default the embedded one)");
  node_cmd->add_option("--node", node_args.node, "the [[node]] name");
  node_cmd->add_option("--join", node_args.join, "HOST:PORT of a running head: join it as a node the topology does not name");
  node_cmd->add_option("--name", node_args.name, "with --join: this node's name (default <hostname>-<pid>)");
  node_cmd->add_option("--explorers", node_args.explorers, "with --join: explorers to run")->check(CLI::Range(0, 1024));
  node_cmd->add_option("--envs-per-explorer", node_args.envs_per_explorer, "with --join: environments per explorer")
      ->check(CLI::Range(1, 65536));
  node_cmd->add_option("--rewards", node_args.rewards, "with --join: reward workers to run")->check(CLI::Range(0, 1024));
  node_cmd->add_option("--head", node_args.head, "HOST:PORT of the head (default: the head's host and port in the TOML)");
  node_cmd->add_option("--secret-file", node_args.secret_file, "file holding the cluster secret (else RLX_CLUSTER_SECRET[_FILE])");
  node_cmd->add_option("--log-level", node_args.log_level, "trace|debug|info|warn|error|off (overrides [log] level)");
  node_cmd->add_flag("--resume", node_args.resume, "head only: continue the run recorded in log_dir");
  node_cmd->add_flag("--resume-diverged", node_args.resume_diverged,
                     "head only, with --resume: go on even when the replayed learner differs from the log");
  rlx::ScaleArgs scale_args;
  auto* scale_cmd = app.add_subcommand("scale", "change the number of explorers and reward workers of a running cluster");
  scale_cmd->add_option("--head", scale_args.head, "HOST:PORT of the head (its log_dir/head.addr)")->required();
  scale_cmd->add_option("--explorers", scale_args.explorers, "explorers wanted")->check(CLI::Range(1, 4096));
  scale_cmd->add_option("--rewards", scale_args.rewards, "reward workers wanted")->check(CLI::Range(0, 4096));
  scale_cmd->add_option("--secret-file", scale_args.secret_file,
                        "file holding the cluster secret (else RLX_CLUSTER_SECRET[_FILE]; a local launch keeps it in log_dir/cluster.secret)");
  scale_cmd->add_option("--config", scale_args.config, "a cluster.toml for the connection settings ([tls])");
  rlx::ReplayArgs replay_args;
  auto* replay_cmd = app.add_subcommand("replay", "train from a rollout log: exact (reproduce the run) or offline (a fresh policy)");
  replay_cmd->add_option("log", replay_args.log, "a log_dir or its rollouts/ directory")->required();
  replay_cmd->add_option("--config", replay_args.config, "a cluster.toml (default: the config recorded in the log)");
  replay_cmd->add_option("--mode", replay_args.mode, "exact | offline")->check(CLI::IsMember({"exact", "offline"}));
  replay_cmd->add_flag("--skip-bad", replay_args.skip_bad, "go on past damaged records (reported) instead of stopping");
  replay_cmd->add_option("--passes", replay_args.passes, "offline: passes over the log's segments")->check(CLI::Range(1, 10000));
  replay_cmd->add_option("--eval-episodes", replay_args.eval_episodes, "offline: greedy episodes to score the result")
      ->check(CLI::Range(1, 100000));
  rlx::SftArgs sft_args;
  auto* sft_cmd = app.add_subcommand("sft", "supervised start of the token policy on the task family's reference answers");
  sft_cmd->add_option("--kind", sft_args.kind, "token task kind")
      ->check(CLI::IsMember({"arithmetic", "code", "workspace"}));
  sft_cmd->add_option("--config", sft_args.config,
                      "a cluster.toml: the policy's shape and task kind (and workspace episodes' [tokens]; its [policy] init, if set, is where training starts); "
                      "needed for workspace");
  sft_cmd->add_option("--init", sft_args.init,
                      "start from these weights instead of the config's [policy] init (an `rlx sft --out` file, hf:DIR for a "
                      "Hugging Face checkpoint, a learner checkpoint ckpt-N.bin or a run's log_dir: its newest)");
  sft_cmd->add_flag("--fresh", sft_args.fresh,
                    "start from fresh weights whatever the config's [policy] init says (to make the start it names)");
  sft_cmd->add_option("--steps", sft_args.steps, "optimizer steps (0: evaluate the start and stop)")
      ->check(CLI::Range(0, 10000000));
  sft_cmd->add_option("--seconds", sft_args.seconds,
                      "stop after the step that ends past this many seconds (evaluations included), if before --steps; "
                      "0: no limit")
      ->check(CLI::Range(0.0, 1e9));
  sft_cmd->add_option("--batch", sft_args.batch, "(task, reference) pairs per step")->check(CLI::Range(1, 65536));
  sft_cmd->add_option("--drills", sft_args.drills,
                      "workspace: one-hole drills per step besides the transcripts (any function of a training project "
                      "made the hole; its read and fix)")
      ->check(CLI::Range(0, 65536));
  sft_cmd->add_option("--recoveries", sft_args.recoveries,
                      "workspace: recovery drills per step besides those (a mistaken call, a cut-short path or name or "
                      "an edit without one, and its error as context; then the read and the fix)")
      ->check(CLI::Range(0, 65536));
  sft_cmd->add_option("--lr", sft_args.lr, "Adam learning rate")->check(CLI::Range(1e-7, 1.0));
  sft_cmd->add_option("--seed", sft_args.seed, "initialisation and task draws");
  sft_cmd->add_option("--eval-every", sft_args.eval_every,
                      "steps between held-out evaluations, each with the checkpoint so far written to --out "
                      "(0: at the end only)")
      ->check(CLI::Range(0, 10000000));
  sft_cmd->add_option("--eval-tasks", sft_args.eval_tasks, "held-out tasks scored")->check(CLI::Range(1, 100000));
  sft_cmd->add_option("--threads", sft_args.threads, "compute threads")->check(CLI::Range(1, 1024));
  sft_cmd->add_option("--device", sft_args.device, "where the model trains: cpu, cuda or cuda:N (a CUDA build)");
  sft_cmd->add_option("--out", sft_args.out, "where the weights go (hf:DIR: a Hugging Face checkpoint, for a Qwen3-MoE policy)");
  rlx::CorpusArgs corpus_args;
  auto* corpus_cmd = app.add_subcommand("corpus", "the expert's transcripts of training workspace tasks, as text to "
                                                  "train a subword vocabulary on (tools/train-tokenizer.sh)");
  corpus_cmd->add_option("--tasks", corpus_args.tasks, "transcripts")->check(CLI::Range(1, 1000000));
  corpus_cmd->add_option("--seed", corpus_args.seed, "the task draws");
  corpus_cmd->add_option("--out", corpus_args.out, "the text file to write")->required();
  rlx::InitModelArgs init_args;
  auto* init_cmd = app.add_subcommand("init-model", "write a fresh checkpoint of a chosen family and shape "
                                                    "(Hugging Face format) "
                                                    "to start a run from: [policy] init = \"hf:DIR\" (docs/hf-models.md)");
  init_cmd->add_option("--hf", init_args.dir, "the checkpoint folder to write")->required();
  init_cmd->add_option("--tokenizer", init_args.tokenizer, "a tokenizer.json, copied beside the weights (default: the character vocabulary)");
  init_cmd->add_option("--vocab", init_args.vocab, "vocabulary rows (default: the tokenizer's size)")->check(CLI::Range(1, 1 << 24));
  init_cmd->add_option("--d-model", init_args.d_model, "hidden size")->check(CLI::Range(8, 65536));
  init_cmd->add_option("--layers", init_args.layers, "decoder layers")->check(CLI::Range(1, 1024));
  init_cmd->add_option("--heads", init_args.heads, "attention heads")->check(CLI::Range(1, 1024));
  init_cmd->add_option("--kv-heads", init_args.kv_heads, "key/value heads (grouped-query attention)")->check(CLI::Range(1, 1024));
  init_cmd->add_option("--head-dim", init_args.head_dim, "each head's width (default d-model / heads)")->check(CLI::Range(2, 4096));
  init_cmd->add_option("--experts", init_args.experts, "experts per layer")->check(CLI::Range(1, 1024));
  init_cmd->add_option("--top-k", init_args.top_k, "experts each token is routed to")->check(CLI::Range(1, 1024));
  init_cmd->add_option("--expert-hidden", init_args.expert_hidden, "each expert's hidden size")->check(CLI::Range(1, 1 << 20));
  init_cmd->add_option("--max-len", init_args.max_len, "max_position_embeddings")->check(CLI::Range(8, 1 << 24));
  init_cmd->add_flag("--tie", init_args.tie, "the output layer shares the token embedding");
  init_cmd->add_option("--family", init_args.family,
                       "qwen3_moe | qwen2_moe (a gated shared expert) | qwen3 | qwen2 | llama (the last three dense)")
      ->check(CLI::IsMember({"qwen3_moe", "qwen2_moe", "qwen3", "qwen2", "llama"}));
  init_cmd->add_option("--mlp-hidden", init_args.mlp_hidden,
                       "a dense layer's hidden size (intermediate_size; default: 4 x d-model)")
      ->check(CLI::Range(1, 1 << 20));
  init_cmd->add_option("--mlp-only-layers", init_args.mlp_only_layers,
                       "MoE families: layers with a dense MLP instead, e.g. 0,3")
      ->delimiter(',');
  init_cmd->add_option("--rope-scaling", init_args.rope_factor,
                       "Llama 3's rope scaling (rope_type llama3; default 8 for llama as 3.1 and 3.2 ship; 0: none)")
      ->check(CLI::Range(0.0, 1024.0));
  init_cmd->add_option("--shared-expert-hidden", init_args.shared_expert_hidden, "qwen2_moe: the shared expert's width (default: expert-hidden)")
      ->check(CLI::Range(1, 1 << 20));
  init_cmd->add_option("--dtype", init_args.dtype, "f32 | bf16")->check(CLI::IsMember({"f32", "bf16"}));
  init_cmd->add_option("--shard-mb", init_args.shard_mb, "largest shard in MiB (0: one file)")->check(CLI::Range(0.0, 1e6));
  init_cmd->add_option("--seed", init_args.seed, "the initialisation");
  rlx::ExportArgs export_args;
  auto* export_cmd = app.add_subcommand("export",
                                        "write a run's token policy as a Hugging Face checkpoint "
                                        "(config.json, safetensors, the tokenizer's files), or its LoRA "
                                        "adapters as PEFT's");
  auto* hf_opt = export_cmd->add_option("--hf", export_args.dir, "the checkpoint folder to write");
  auto* peft_opt = export_cmd->add_option("--peft", export_args.peft,
                                          "the folder to write a LoRA policy's adapters to (adapter_config.json, "
                                          "adapter_model.safetensors)");
  hf_opt->excludes(peft_opt);
  export_cmd->add_flag("--merge", export_args.merge, "with --hf, a LoRA policy: its adapters merged into the base");
  export_cmd->add_option("--config", export_args.config, "the run's cluster.toml")->required();
  export_cmd->add_option("--from", export_args.from,
                         "a learner checkpoint (ckpt-N.bin), a log_dir (its newest), an `rlx sft --out` file or hf:DIR "
                         "(default: the config's log_dir)");
  export_cmd->add_option("--dtype", export_args.dtype, "f32 (exact) | bf16")->check(CLI::IsMember({"f32", "bf16"}));
  export_cmd->add_option("--shard-mb", export_args.shard_mb, "largest shard in MiB (0: one file)")->check(CLI::Range(0.0, 1e6));
  std::string check_dir;
  bool check_json = false;
  auto* check_model_cmd = app.add_subcommand("check-model", "load a Hugging Face checkpoint as a run would: its shape, load "
                                                            "time and resident memory, and one forward pass");
  check_model_cmd->add_option("--hf", check_dir, "the checkpoint folder")->required();
  check_model_cmd->add_flag("--json", check_json, "one JSON line");
  rlx::InspectArgs inspect_args;
  auto* inspect_cmd = app.add_subcommand("inspect", "summarise a rollout log");
  inspect_cmd->add_option("log", inspect_args.log, "a log_dir or its rollouts/ directory")->required();
  inspect_cmd->add_flag("--json", inspect_args.json, "print the summary as JSON");
  inspect_cmd->add_option("--plot", inspect_args.plot, "draw return and staleness over time into this PNG (gnuplot)");
  inspect_cmd->add_flag("--skip-bad", inspect_args.skip_bad, "go on past damaged records (reported) instead of stopping");
  rlx::LearnerRankArgs rank_args;
  auto* rank_cmd = app.add_subcommand("learner-rank", "one data-parallel learner rank (started by launch when [learner] ranks > 1)");
  rank_cmd->add_option("--config", rank_args.config, "the run's TOML")->required();
  rank_cmd->add_option("--rank", rank_args.rank, "this rank, 1..world-1")->required();
  rank_cmd->add_option("--world", rank_args.world, "number of ranks")->required();
  rank_cmd->add_option("--store", rank_args.store, "HOST:PORT of the rendezvous store")->required();
  rank_cmd->add_option("--host", rank_args.host, "this rank's own address for the group's traffic (default: the store's host)");
  std::string plot_dir, plot_out;
  auto* plot_cmd = app.add_subcommand("plot", "draw a run's metrics.jsonl curves (gnuplot)");
  plot_cmd->add_option("log_dir", plot_dir, "the run's log_dir")->required();
  plot_cmd->add_option("--out", plot_out, "PNG to write (default: <log_dir>/metrics.png)");
  std::string bench_filter, bench_out;
  int bench_seeds = 3;
  auto* bench_cmd = app.add_subcommand("bench", "run the benchmarks (ratios against raw baselines)");
  bench_cmd->add_option("--only", bench_filter, "run only benchmarks whose name contains this");
  bench_cmd->add_option("--seeds", bench_seeds, "seeds for the time-to-solve benchmarks");
  bench_cmd->add_option("--markdown", bench_out, "also write the results as a Markdown table to this file");
  std::string serve_name = "cartpole", serve_protocol = "json";
  auto* serve_cmd = app.add_subcommand("serve-env", "serve a built-in env over the external-env protocol on stdin/stdout");
  serve_cmd->add_option("name", serve_name, "built-in env name");
  serve_cmd->add_option("--protocol", serve_protocol, "json | capnp")->check(CLI::IsMember({"json", "capnp"}));
  int tools_turns = 8;
  auto* tools_cmd = app.add_subcommand("workspace-tools", "run workspace episodes' tool calls and score them for an agent "
                                       "harness: JSON lines on stdin/stdout (docs/gateway.md)");
  tools_cmd->add_option("--max-turns", tools_turns, "turns before an episode ends unsubmitted ([tokens] max_turns)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  // The processes that train or sample run with compute threads that sleep
  // when idle: set before anything starts, by running again (policy/threads.hpp).
  const bool computes = *launch_cmd || *node_cmd || *rank_cmd || *sft_cmd || *replay_cmd;
  if (computes) rlx::rerun_with_sleeping_threads(argv);
  // They look at the heap's freed pages every 2 s (core/free_memory.hpp):
  // without it their resident memory climbs with every update. On glibc
  // every free page goes back; jemalloc keeps its pages for the next step
  // and gives them back when they outgrow the live heap (core/allocator.hpp).
  std::optional<rlx::FreeMemoryReturner> returner;
  if (computes) returner.emplace(std::chrono::seconds(2));
  if (*tools_cmd) return rlx::workspace_tools_command(tools_turns);
  if (*serve_cmd) return rlx::serve_env(serve_name, *rlx::choice_of<rlx::EnvProtocol>(serve_protocol), rlx::builtin_envs());
  if (*launch_cmd) return rlx::launch_command(launch_args);
  if (*node_cmd) return rlx::node_command(node_args);
  if (*scale_cmd) return rlx::scale_command(scale_args);
  if (*replay_cmd) return rlx::replay_command(replay_args);
  if (*inspect_cmd) return rlx::inspect_command(inspect_args);
  if (*plot_cmd) return rlx::plot_command(plot_dir, plot_out);
  if (*rank_cmd) return rlx::learner_rank_command(rank_args);
  if (*sft_cmd) return rlx::sft_command(sft_args);
  if (*corpus_cmd) return rlx::corpus_command(corpus_args);
  if (*init_cmd) return rlx::init_model_command(init_args);
  if (*export_cmd) return rlx::export_command(export_args);
  if (*check_model_cmd) return rlx::check_model_command(check_dir, check_json);
  if (*bench_cmd) return rlx::run_benchmarks(rlx::BenchOptions{bench_filter, bench_seeds, bench_out});
  return 1;
}
