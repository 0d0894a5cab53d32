#include "assembly/cluster.hpp"

#include "assembly/component_options.hpp"

#include "core/clock.hpp"

#include <malloc.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <future>
#include <thread>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "control/gate.hpp"
#include "assembly/remote.hpp"
#include "assembly/node_gateway.hpp"
#include "assembly/run_watchers.hpp"
#include "assembly/held_system.hpp"
#include "transport/front_door.hpp"
#include "transport/weight_bulk.hpp"

#include "core/auth.hpp"
#include "core/files.hpp"
#include "core/progress.hpp"
#include "envs/batch_env.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "policy/threads.hpp"
#include "learner/checkpoint.hpp"
#include "learner/learner_ranks.hpp"
#include "rollout_log/replay.hpp"

namespace rlx {

namespace fs = std::filesystem;

std::size_t scheduler_threads(const ClusterConfig& config) {
  // One per core: the learner trains on one while explorers and envs share
  // the rest; more threads than cores only adds context switches. A token
  // run's learner, evaluator and reward workers each hold a thread for
  // seconds at a time (an update, a held-out pass, a sandboxed program):
  // each gets one of its own, so the coordinator and explorers still run.
  const std::size_t cores = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  if (!config.token_run()) return cores;
  return cores + 2 + static_cast<std::size_t>(config.head().rewards);
}

namespace {

struct Prepared {
  std::unique_ptr<LearnerRanks> ranks;  // data-parallel learner ranks (null: one)
  std::shared_ptr<LogWriter> writer;
  std::shared_ptr<LearnerCore> resumed;
};

// Opens the rollout log: a fresh one (a previous run's log in the same
// log_dir is moved to rollouts.previous/), or, resuming, the existing one
// with the learner rebuilt from it.
Result<Prepared> prepare(const ClusterConfig& config, const EnvRegistry& envs, const RunOptions& options,
                         const Logger& log) {
  Prepared p;
  const fs::path dir = fs::path(config.run.log_dir) / "rollouts";
  if (options.resume && !config.run.record)
    return make_error(Errc::config_range, "--resume continues the rollout log, but [run] record = false");
  if (auto device = check_device(config.learner.device); !device) return device.error();
  if (config.token_run())
    if (auto t = check_tokenizer(config.tokens.tokenizer); !t) return t.error();
  if (auto init = check_policy_init(config.policy, config.tokens); !init) return init.error();
  // Ranks 1..N-1 start, and this process joins as rank 0, when [learner] ranks > 1.
  auto ranks = LearnerRanks::start_for(config, fs::path(config.run.log_dir) / "learner-ranks.toml", options.binary, log,
                                       options.start_remote_rank);
  if (!ranks) return ranks.error();
  p.ranks = std::move(*ranks);
  if (!config.run.record) return p;
  LogWriterOptions wo{dir, static_cast<std::uint64_t>(config.record.file_mb) << 20, config.record.compress == "zstd",
                      static_cast<int>(config.record.compress_level), options.log_fail_after_bytes};
  if (options.resume) {
    std::string repaired;
    auto w = LogWriter::resume(wo, &repaired);
    if (!w) return w.error();
    if (!repaired.empty()) log->warn("rollout log: {}", repaired);
    const EnvSpec spec = make_batch_env_factory(config.run.env, config.external, envs, log)(config.run.seed, 0, 1)->spec();
    auto core = learner_core_options(config, spec);
    core.trainer.group = p.ranks ? p.ranks->group() : nullptr;
    // A long log says how far it is, every 10 s, against what its indexes list.
    const auto records = indexed_records(dir);
    const auto replay_start = std::chrono::steady_clock::now();
    auto said = replay_start;
    auto progress = [&](std::uint64_t entries, std::uint64_t updates) {
      const auto now = std::chrono::steady_clock::now();
      if (now - said < std::chrono::seconds(10)) return;
      said = now;
      const double elapsed = std::chrono::duration<double>(now - replay_start).count();
      const std::string left =
          records ? left_text(static_cast<double>(entries), static_cast<double>(*records), elapsed) : std::string();
      log->info("resuming: replayed {}{} entries, {} updates{}", entries,
                records ? fmt::format(" of {}", *records) : std::string(), updates, left.empty() ? "" : ", " + left);
    };
    // The newest checkpoint that agrees with the log, then the log's tail;
    // else the whole log. Data-parallel ranks take the state of whichever
    // core trains through them (LearnerCore::train).
    Result<ExactReplay> r = make_error(Errc::not_found, "");
    for (const auto& file : list_checkpoints(fs::path(config.run.log_dir) / "checkpoints")) {
      auto loaded = load_checkpoint(file, core);
      if (!loaded) {
        log->warn("checkpoint skipped: {}", loaded.error().message);
        continue;
      }
      const auto held = loaded->core->received();
      const auto from_version = loaded->core->trainer().version();
      auto attempt = replay_exact(dir, core, ReadOptions{}, progress, loaded->core);
      if (!attempt) return attempt.error();
      if (attempt->skipped < held || attempt->diverged()) {
        log->warn("checkpoint {} does not match the rollout log ({} of its {} arrivals logged, {} of {} versions "
                  "identical): trying an older one",
                  file.string(), attempt->skipped, held, attempt->versions_matched, attempt->versions_checked);
        continue;
      }
      log->info("resuming from checkpoint {} (v{}): {} arrivals after it replayed from the log", file.string(),
                from_version, attempt->segments);
      r = std::move(attempt);
      break;
    }
    if (!r) {
      log->info("resuming: replaying the rollout log in {} to rebuild the learner", dir.string());
      r = replay_exact(dir, core, ReadOptions{}, progress);
    }
    if (!r) return r.error();
    if (r->diverged()) {
      const std::string what = fmt::format(
          "the replayed learner differs from the rollout log in {}: first at {} ({} of {} versions match; were seed, "
          "config or thread counts changed?)",
          dir.string(), r->first_divergence(), r->versions_matched, r->versions_checked);
      if (!options.resume_diverged)
        return make_error(Errc::corrupt_record, what + "; --resume-diverged resumes anyway, from the replayed learner");
      log->error("RESUMING A DIVERGED RUN (--resume-diverged): {}", what);
    } else if (r->versions_checked == 0) {
      log->warn("resuming: the log holds no weight version to check the replayed learner against");
    }
    log->info("resumed at policy v{} after {} entries ({} env steps) in {:.1f} s", r->core->trainer().version(),
              r->read.entries, r->core->stats().env_steps(), r->seconds);
    p.resumed = r->core;
    p.writer = std::move(*w);
  } else {
    std::error_code ec;
    const fs::path checkpoints = fs::path(config.run.log_dir) / "checkpoints";
    if (!fs::is_empty(checkpoints, ec) && !ec) {  // a previous run's: not this run's to resume from
      fs::remove_all(fs::path(config.run.log_dir) / "checkpoints.previous", ec);
      fs::rename(checkpoints, fs::path(config.run.log_dir) / "checkpoints.previous", ec);
    }
    ec.clear();
    auto existing = logfiles::list(dir);
    if (existing && !existing->empty()) {
      const fs::path previous = fs::path(config.run.log_dir) / "rollouts.previous";
      fs::remove_all(previous, ec);
      fs::rename(dir, previous, ec);
      if (ec) return make_error(Errc::io, "cannot move the previous log aside: " + ec.message());
      log->warn("{} held a previous run's log: moved to {}", dir.string(), previous.string());
    }
    auto w = LogWriter::create(wo);
    if (!w) return w.error();
    p.writer = std::move(*w);
  }
  auto started = p.writer->write_start(RunStartData{unix_now_ns(), options.resume, to_toml(config), config.source});
  if (!started) return started.error();
  log->info("recording rollouts to {}", dir.string());
  return p;
}

}  // namespace


RunResult run_cluster(const ClusterConfig& config, const EnvRegistry& envs, const RunHooks& hooks, const Logger& log,
                      const RunOptions& options) {
  configure_compute_threads(static_cast<int>(config.learner.threads));
  RunResult result;
  // Strangers on the head's ports; what watches the run (/metrics,
  // TensorBoard, the alerts' webhook) and the harnesses' gateway
  // (tokens:gateway), before anything is prepared (no log moved, no learner
  // rank started), so a port either cannot take or a bad URL fails the
  // start with nothing to undo.
  std::shared_ptr<StrangerWatch> strangers;
  if (options.serve || config.metrics.prometheus || config.run.env == "tokens:gateway")
    strangers = std::make_shared<StrangerWatch>(child_logger(log, "strangers"));
  auto watchers = start_watchers(config, strangers, log);
  Result<std::unique_ptr<NodeGateway>> gateway = std::unique_ptr<NodeGateway>();  // null: no gateway
  if (watchers) gateway = start_node_gateway(config, options.secret, strangers, log);
  if (!watchers || !gateway) {
    const auto& e = watchers ? gateway.error() : watchers.error();
    result.outcome = e.code == Errc::config_range ? RunOutcome::bad_input : RunOutcome::failed;
    result.summary = config.run.name + ": cannot start: " + e.message;
    if (watchers) watchers->ended(result.outcome, result.summary, true);
    return result;
  }
  Result<Prepared> prepared = make_error(Errc::io, "");
  try {
    prepared = prepare(config, envs, options, log);
  } catch (const EnvFailure& e) {
    prepared = make_error(Errc::io, std::string("cannot start the environment: ") + e.what());
  }
  if (!prepared) {
    // A damaged or missing log is bad input; a disk or env failure is not.
    result.outcome = prepared.error().code == Errc::io || prepared.error().code == Errc::timeout ||
                                 prepared.error().code == Errc::group_broken
                         ? RunOutcome::failed
                                                                                                : RunOutcome::bad_input;
    result.summary = config.run.name + ": cannot start: " + prepared.error().message;
    watchers->ended(result.outcome, result.summary, true);
    return result;
  }
  // The system and the configuration it refers to, together: handed back,
  // not destroyed, if actors outlive the shutdown bound (destroying the
  // system would wait for them).
  auto owned = std::make_shared<HeldSystem>();
  caf::actor_system_config& cfg = owned->cfg;
  register_handle_types(cfg);
  if (options.serve) configure_remoting(cfg, config);
  cfg.set("scheduler.max-threads", scheduler_threads(config));
  // A token run allocates large tensors of varying sizes on many threads:
  // glibc's per-thread arenas then fragment (a code run's resident memory
  // grew to 1.31 GB in 22 updates with the default, 0.88 GB with 2 arenas:
  // docs/token-policy.md). Set before the scheduler's threads exist.
  if (config.token_run()) mallopt(M_ARENA_MAX, 2);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system& system = owned->system.emplace(cfg);
  if (options.stuck_actor.valid()) {
    // On a thread of its own: it blocks no scheduler thread of the run.
    // (An argument: CAF 0.17 binds a null tuple for an argument-less function actor; UBSan stops there.)
    auto stuck = system.spawn<caf::detached>([f = options.stuck_actor](caf::event_based_actor* self, int) -> caf::behavior {
      return {[self, f](stop_atom) {
        f.wait();
        self->quit();
      }};
    }, 0);
    caf::anon_send(stuck, stop_atom::value);
  }
  {
    caf::scoped_actor self{system};
    CoordinatorOptions co;
    co.config = config;
    co.envs = &envs;
    co.on_status = hooks.on_status;
    co.launcher = caf::actor{self};
    co.log_writer = prepared->writer;
    co.resumed = prepared->resumed;
    co.learner_group = prepared->ranks ? prepared->ranks->group() : nullptr;
    co.log = child_logger(log, "coordinator");
    co.drop_segments = options.drop_segments;
    // Shared: the coordinator may call it after this thread gave up waiting.
    auto core_promise = std::make_shared<std::promise<std::pair<learner_actor, weight_store_actor>>>();
    auto core_future = core_promise->get_future();
    std::unique_ptr<BulkServer> bulk;  // weights to member nodes beside the middleman
    std::unique_ptr<FrontDoor> door;   // the head's port, in front of CAF's
    co.strangers = strangers;
    co.gateway = *gateway ? (*gateway)->hub : nullptr;
    co.on_report = watchers->on_report(config.run.name, log);
    if (options.serve) {
      co.weight_shelf = std::make_shared<WeightShelf>(static_cast<std::size_t>(config.weight_store.keep_versions),
                                                      static_cast<std::uint64_t>(config.weight_store.chunk_kb) << 10,
                                                      0, config.weight_store.deltas);
      co.spawn_nodes = {config.head().name};
      co.on_core = [core_promise](learner_actor l, weight_store_actor w) { core_promise->set_value({l, w}); };
    }
    // Read before the learner owns the resumed core.
    const std::uint64_t start_version = prepared->resumed ? prepared->resumed->trainer().version() : 0;
    auto coordinator = spawn_coordinator(system, co);
    gate_actor gate;
    std::string start_failed;  // the gate or the member nodes could not start
    if (options.serve) {
      // Set by the coordinator's first step, even when the cluster cannot start.
      std::pair<learner_actor, weight_store_actor> core;
      if (core_future.wait_for(std::chrono::seconds(120)) == std::future_status::ready) {
        core = core_future.get();
      } else {
        start_failed = "the coordinator did not start its learner and weight store within 120 s";
        caf::anon_send(coordinator, stop_atom::value, start_failed);
      }
      auto [learner, store] = core;
      if (learner) {
        GateOptions go;
        go.secret = options.secret;
        go.head = config.head().name;
        go.config_toml = to_toml(config);
        go.run_id = run_identity(config, options.resume, log);
        go.incarnation = random_nonce();
        go.start_version = start_version;
        go.learner = learner;
        go.weight_store = store;
        go.coordinator = coordinator;
        go.log = child_logger(log, "gate");
        const auto& head = config.head();
        if (config.weight_store.bulk && !config.tls.enabled()) {
          // Failing to listen costs speed, not correctness: weights then go through the middleman.
          auto server = BulkServer::start(BulkServerOptions{head.host, 0, options.secret, head.name, 256,
                                                            stranger_timeout(config), std::chrono::minutes(10),
                                                            child_logger(log, "bulk"), strangers},
                                          co.weight_shelf);
          if (server) {
            bulk = std::move(*server);
            go.bulk_port = bulk->port();
            if (hooks.on_bulk_listening) hooks.on_bulk_listening(go.bulk_port);
            log->info("weights to member nodes over the bulk channel on {}:{}", head.host, go.bulk_port);
          } else {
            log->warn("{}; weights go through the middleman", server.error().message);
          }
        }
        gate = spawn_gate(system, go);
        auto opened = open_head_port(gate, config, options.resume, strangers, log);
        Result<std::uint16_t> port = opened ? Result<std::uint16_t>((*opened)->port()) : Result<std::uint16_t>(opened.error());
        if (opened) door = std::move(*opened);
        if (!port) {
          log->error("{}", port.error().message);
          start_failed = port.error().message;
          caf::anon_send(coordinator, stop_atom::value, port.error().message);
        } else {
          log->info("head listening on {}:{}{}", head.host, *port, config.tls.enabled() ? " (TLS)" : "");
          // For `rlx scale` and `rlx node --join` (docs/cluster.md).
          const auto addr_file = fs::path(config.run.log_dir) / "head.addr";
          if (auto w = write_text_atomically(addr_file, reachable_address(head.host, *port) + "\n"); !w)
            log->warn("cannot write {}: {}", addr_file.string(), w.error().message);
          const std::string error = hooks.on_listening ? hooks.on_listening(*port) : "";
          if (!error.empty()) {
            log->error("{}", error);
            start_failed = error;
            caf::anon_send(coordinator, stop_atom::value, error);
          }
        }
      }
    }
    if (hooks.on_start)
      hooks.on_start([coordinator](const std::string& why) { caf::anon_send(coordinator, stop_atom::value, why); });
    // The coordinator says how the run ended; should it die instead (an
    // exception in a handler, a broken invariant), the actors linked to it
    // die with it and the run ends as failed, with the reason.
    self->monitor(coordinator);
    // It ticks every report interval; silence past the bound means a
    // handler that never returns (a deadlock, a blocking call).
    const auto silence_bound = std::max<std::chrono::steady_clock::duration>(
        options.coordinator_bound, 10 * std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::duration<double>(config.run.report_interval_s)));
    auto last_tick = std::chrono::steady_clock::now();
    for (bool ended = false; !ended;)
      self->receive(
          [&](tick_atom) { last_tick = std::chrono::steady_clock::now(); },
          [&](done_atom, int outcome, const std::string& summary) {
            result.outcome = static_cast<RunOutcome>(outcome);
            result.summary = summary;
            ended = true;
          },
          [&](caf::down_msg& dm) {
            if (dm.source != coordinator.address()) return;
            result.outcome = RunOutcome::failed;
            result.summary = config.run.name + ": failed: the coordinator died (" + system.render(dm.reason) + ")";
            log->error("{}", result.summary);
            ended = true;
          },
          caf::after(std::chrono::seconds(1)) >> [&] {
            const auto silent = std::chrono::steady_clock::now() - last_tick;
            if (silent < silence_bound) return;
            result.outcome = RunOutcome::failed;
            result.summary = fmt::format("{}: failed: the coordinator has not ticked for {:.0f} s (stuck in a handler)",
                                         config.run.name, std::chrono::duration<double>(silent).count());
            log->error("{}", result.summary);
            // Taken when its handler returns, if ever; the actors linked to it go with it.
            self->send_exit(coordinator, caf::exit_reason::kill);
            ended = true;
          });
    if (hooks.on_start) hooks.on_start(nullptr);
    if (gate) self->send_exit(gate, caf::exit_reason::user_shutdown);
    // Harnesses waiting on turns get their answer now, not when the explorers are gone.
    if (*gateway) (*gateway)->hub->close("the run ended");
    if (!start_failed.empty()) {
      result.outcome = RunOutcome::failed;
      result.summary = config.run.name + ": cannot start the cluster: " + start_failed;
    }
  }
  // Every actor was told to exit. One stuck in a call that never returns
  // must not hang the launcher: after the bound it is counted and left
  // behind with the actor system, and the run has failed.
  if ((result.actors_left = actors_left_after(system, options.shutdown_bound, log, "the run's end"))) {
    result.outcome = RunOutcome::failed;
    result.summary += fmt::format(" (FAILED to end: {} actors did not exit)", result.actors_left);
    result.left_behind = owned;
  }
  if (prepared->writer) (void)prepared->writer->close();  // idempotent: the recorder closed it when it flushed
  if (prepared->ranks && prepared->ranks->stop() > 0 && result.outcome != RunOutcome::failed)
    log->warn("some learner rank processes did not exit cleanly");
  if (*gateway) (*gateway)->log->info("{}", (*gateway)->summary());
  watchers->ended(result.outcome, result.summary, true);  // out (or given up on) before the launcher exits
  return result;
}

}  // namespace rlx
