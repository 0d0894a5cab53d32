#include "control/coordinator.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <fstream>

#include <fmt/format.h>

#include "assembly/component_options.hpp"
#include "assembly/fleet.hpp"
#include "control/coordinator_state.hpp"
#include "actors/guard.hpp"
#include "actors/learner_actor.hpp"
#include "actors/evaluator_actor.hpp"
#include "actors/recorder.hpp"
#include "actors/weight_store.hpp"
#include "core/free_memory.hpp"
#include "envs/batch_env.hpp"
#include "envs/tokens/token_env.hpp"
#include "envs/tokens/token_tasks.hpp"

namespace rlx {
namespace coord {

std::chrono::milliseconds report_period(const ClusterConfig& c) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(c.run.report_interval_s * 1000.0));
}

// produced = trained + dropped_stale + rejected + lost + vanished +
// in_flight, where the learner's counts come from its last report.
SegmentLedger::Totals account(const CoordinatorState& st) {
  SegmentLedger::ArrivalCounts arrivals;
  for (const auto& a : st.metrics.arrivals_by_explorer) arrivals[a.explorer] = {a.accounted, a.vanished};
  return st.ledger.account(
      SegmentLedger::Counts(st.metrics.segments_by_explorer.begin(), st.metrics.segments_by_explorer.end()), arrivals,
      st.end.final_counts);
}

// Segments sent and never received, though sender and learner lived: a
// warning each time more are found (the learner names their indices).
void warn_vanished(CoordinatorState& st) {
  const auto a = account(st);
  if (a.vanished <= st.vanished_warned) return;
  st.options.log->warn("{} segments vanished between explorers and the learner ({} in all): the accounting does not add up",
                       a.vanished - st.vanished_warned, a.vanished);
  st.vanished_warned = a.vanished;
}

// The coordinator's own counts, for the report.
RunCounts run_counts(const CoordinatorState& st) {
  RunCounts r;
  r.time_s = st.elapsed();
  r.explorers = st.explorers.size();
  r.explorers_lost = st.tally.explorers_lost;
  r.explorers_retired = st.tally.explorers_retired;
  r.explorers_rejoined = st.ledger.rejoined_count();
  r.nodes = st.nodes.size() + 1;
  r.joins_refused = st.tally.joins_refused;
  r.nodes_evicted = st.tally.nodes_evicted;
  r.reward_workers = st.plan->reward_workers();
  r.autoscale_changes = st.tally.autoscale_changes;
  r.weight_swaps = st.tally.swap_latency;
  r.reward_latency = st.tally.reward_latency;
  r.explorer_nodes = st.tally.explorer_node;
  for (const auto& [id, e] : st.explorers)
    if (auto n = st.tally.explorer_node.find(id); n != st.tally.explorer_node.end()) ++r.explorers_by_node[n->second];
  r.weight_swap_mean_us = st.tally.swaps ? st.tally.swap_us_sum / static_cast<double>(st.tally.swaps) : 0.0;
  r.rss_mb = resident_bytes() >> 20;
  r.segments = account(st);
  r.eval = st.eval;
  r.segments_unrecorded = st.tally.unrecorded;
  if (st.options.strangers) r.strangers = st.options.strangers->by_port();
  r.gateway = st.gateway_counts();
  return r;
}

void write_metrics_line(Self self) {
  auto& st = self->state;
  const auto counts = run_counts(st);
  if (st.options.on_report) st.options.on_report(st.metrics, counts);
  if (!st.jsonl) return;
  st.jsonl << metrics_json_line(st.metrics, counts);
  st.jsonl.flush();
}

Status make_status(Self self) {
  auto& st = self->state;
  const auto& m = st.metrics;
  const auto r = run_counts(st);
  const double dt = r.time_s - st.last_tick_s;
  // (Before a resumed learner's first report the counts are still zero.)
  const double steps_per_s = dt > 0 && m.env_steps >= st.last_tick_steps
                                 ? static_cast<double>(m.env_steps - st.last_tick_steps) / dt
                                 : 0;
  return rlx::make_status(m, r, steps_per_s);
}

// The launcher learns the outcome; the coordinator exits.
void send_done(Self self) {
  auto& st = self->state;
  if (st.end.done_sent) return;
  st.end.done_sent = true;
  caf::anon_send(st.options.launcher, done_atom::value, static_cast<int>(st.end.outcome), st.end.summary);
  self->quit();
}

// Every actor exits; the launcher learns the outcome.
void finish(Self self) {
  auto& st = self->state;
  if (st.end.finish_started) return;
  st.end.finish_started = true;
  auto shutdown = [self](std::uint64_t records) {
    auto& st = self->state;
    // The last line, after the recorder's flush: every record it failed to take is counted in it.
    if (st.end.final_counts) write_metrics_line(self);
    for (auto& r : st.rewards) self->send_exit(r, caf::exit_reason::user_shutdown);
    if (st.evaluator) self->send_exit(st.evaluator, caf::exit_reason::user_shutdown);
    self->send_exit(st.learner, caf::exit_reason::user_shutdown);
    self->send_exit(st.weight_store, caf::exit_reason::user_shutdown);
    if (st.recorder) self->send_exit(st.recorder, caf::exit_reason::user_shutdown);
    const auto& m = st.metrics;
    const auto a = account(st);
    std::string summary = fmt::format(
        "{}: {} after {:.1f} s, {} env steps, {} episodes, mean return {:.1f} at the end, policy v{}, segments produced {}: "
        "trained {}{} / dropped stale {} / rejected {} / lost {}{}{}, {} records{}{}",
        st.options.config.run.name, st.end.reason, st.elapsed(), m.env_steps, m.episodes, m.mean_return, m.policy_version,
        a.produced, m.segments_trained,
        m.segments_update_failed ? fmt::format(" / update failed {}", m.segments_update_failed) : "",
        m.segments_dropped_stale, m.segments_rejected, a.lost,
        a.vanished ? fmt::format(" / VANISHED {} (sent, never received: the accounting does not add up)", a.vanished) : "",
        a.in_flight ? fmt::format(" / in flight {}", a.in_flight) : "", records,
        st.tally.unrecorded ? fmt::format(" ({} NOT recorded: the rollout log failed)", st.tally.unrecorded) : "",
        st.options.strangers && st.options.strangers->total()
            ? fmt::format(", {} strangers closed on the head's ports", st.options.strangers->total())
            : "");
    // Member nodes exit when told; their down messages (or the deadline) end the run.
    st.end.summary = summary;
    st.end.finishing = true;
    st.end.deadline = std::chrono::steady_clock::now() + st.drain_allowance();
    for (auto& [name, agent] : st.nodes) self->send(agent, stop_atom::value, st.end.reason);
    if (st.nodes.empty()) send_done(self);
  };
  auto flush = [self, shutdown] {
    auto& st = self->state;
    if (!st.recorder) return shutdown(0);
    self->request(st.recorder, std::chrono::seconds(10), flush_atom::value)
        .then([shutdown](std::uint64_t n) { shutdown(n); },
              [self, shutdown](const caf::error& e) {
                self->state.options.log->error("recorder did not flush: {}", self->system().render(e));
                shutdown(0);
              });
  };
  // Final counts, the last update checkpointed: the drained explorers' segments reached the learner first.
  const auto wait = st.final_counts_wait();
  self->request(st.learner, wait, stop_atom::value)
      .then(
          [self, flush](const WireMsg& msg) {
            auto& st = self->state;
            if (auto m = decode<MetricsData>(msg.buf)) {
              st.metrics = std::move(*m);
              st.end.final_counts = true;  // asked after the drained explorers' goodbyes
            }
            warn_vanished(st);
            flush();
          },
          [self, flush, wait](const caf::error& e) {
            self->state.options.log->warn("the learner did not give its final counts within {:.0f} s ({}): the last "
                                          "metrics line and the summary hold its counts from before the end",
                                          std::chrono::duration<double>(wait).count(), self->system().render(e));
            flush();
          });
}

void begin_stop(Self self, RunOutcome outcome, const std::string& reason) {
  auto& st = self->state;
  if (st.end.stopping) return;
  st.end.stopping = true;
  st.end.outcome = outcome;
  st.end.reason = reason;
  st.options.log->info("stopping: {}", reason);
  write_metrics_line(self);
  if (st.options.on_status) st.options.on_status(make_status(self));
  st.end.deadline = std::chrono::steady_clock::now() + st.drain_allowance();
  for (auto& [id, e] : st.explorers) self->send(e, drain_atom::value);
  finish_if_drained(self);
}

void check_stop(Self self) {
  auto& st = self->state;
  const auto& stop = st.options.config.run.stop;
  const auto& m = st.metrics;
  if (m.episodes >= 100 && m.mean_return >= stop.mean_return)
    begin_stop(self, RunOutcome::solved, fmt::format("solved (mean return {:.1f} >= {})", m.mean_return, stop.mean_return));
  else if (m.env_steps >= stop.max_env_steps)
    begin_stop(self, RunOutcome::budget, fmt::format("max_env_steps {} reached", stop.max_env_steps));
  else if (stop.max_seconds > 0 && st.elapsed() >= stop.max_seconds)
    begin_stop(self, RunOutcome::budget, fmt::format("max_seconds {} reached", stop.max_seconds));
  else if (stop.max_updates > 0 && m.policy_version >= stop.max_updates)
    begin_stop(self, RunOutcome::budget, fmt::format("max_updates {} reached", stop.max_updates));
}

void spawn_cluster(Self self) {
  auto& st = self->state;
  const auto& cfg = st.options.config;
  auto log = st.options.log;
  const BatchEnvFactory factory = make_batch_env_factory(cfg.run.env, cfg.external, *st.options.envs, log);
  const EnvSpec spec = factory(cfg.run.seed, 0, 1)->spec();  // throws EnvFailure if the env cannot start
  auto scorer = make_scorer(cfg.reward.scorer);
  if (!scorer) throw EnvFailure(scorer.error().message);  // e.g. "code" without a sandbox that runs here
  st.scorer = *scorer;
  coordinator_actor me{self};

  WeightStoreOptions wo{static_cast<std::size_t>(cfg.weight_store.keep_versions),
                        static_cast<std::uint64_t>(cfg.weight_store.chunk_kb) << 10, child_logger(log, "weight_store")};
  wo.shelf = st.options.weight_shelf;
  const std::uint64_t max_set = cfg.weight_store.max_set_bytes();  // one look at the machine's memory
  wo.decode = weight_set_decoding(max_set);
  st.weight_store = spawn_weight_store(self->system(), wo);
  self->link_to(st.weight_store);
  if (st.options.log_writer) {
    st.recorder = spawn_recorder(self->system(), RecorderOptions{st.options.log_writer, me, child_logger(log, "recorder")});
    self->link_to(st.recorder);
  }
  LearnerActorOptions lo;
  lo.core = learner_core_options(cfg, spec);
  lo.core.trainer.group = st.options.learner_group;
  lo.resumed = st.options.resumed;
  // Rank 0's core is the whole learner: the other ranks hold copies of its
  // state, which they take again from a core loaded from a checkpoint.
  lo.checkpoint_dir = std::filesystem::path(cfg.run.log_dir) / "checkpoints";
  lo.checkpoint_every = static_cast<std::uint64_t>(cfg.learner.checkpoint_every);
  lo.checkpoint_keep = static_cast<int>(cfg.learner.checkpoint_keep);
  lo.weight_store = st.weight_store;
  lo.recorder = st.recorder;
  lo.coordinator = me;
  lo.log = child_logger(log, "learner");
  lo.max_set_bytes = max_set;
  lo.drop_for_test = st.options.drop_segments;
  st.learner = spawn_learner(self->system(), lo);
  self->monitor(st.learner);
  self->link_to(st.learner);
  if (cfg.token_run() && cfg.tokens.eval_tasks > 0) {
    // Its own scorer: held-out programs run in the sandbox here, not in the reward pool.
    auto eval_scorer = make_scorer(scorer_for(token_env_kind(cfg.run.env)));
    if (!eval_scorer) throw EnvFailure("the evaluator: " + eval_scorer.error().message);
    EvaluatorOptions eo{token_env_kind(cfg.run.env), cfg.policy, cfg.tokens, *eval_scorer, st.weight_store, me,
                        std::chrono::milliseconds(30000), child_logger(log, "evaluator")};
    eo.weights = wo.decode;
    st.evaluator = spawn_evaluator(self->system(), eo);
    self->link_to(st.evaluator);
  }

  if (st.options.on_core) st.options.on_core(st.learner, st.weight_store);
  st.factory = factory;
  st.spec = spec;
  // A resumed run: no explorer id the log knows is given out again.
  auto before = st.ledger.delivered_before();
  before.erase(LearnerCore::kUnattributed);
  st.plan->resume(before);
  for (const auto& node : cfg.nodes)
    if (st.options.spawn_nodes.empty() || st.options.spawn_nodes.count(node.name)) spawn_here(self, node);
}

coordinator_actor::behavior_type coordinator_impl(Self self, CoordinatorOptions options) {
  auto& st = self->state;
  st.options = std::move(options);
  const auto& cfg = st.options.config;
  st.plan.emplace(cfg);
  std::error_code ec;
  std::filesystem::create_directories(cfg.run.log_dir, ec);
  // A resumed run continues its metrics; a fresh one starts them anew.
  st.jsonl.open(std::filesystem::path(cfg.run.log_dir) / "metrics.jsonl",
                st.options.resumed ? std::ios::app : std::ios::trunc);
  if (st.options.resumed) {
    st.last_tick_steps = st.options.resumed->stats().env_steps();
    st.ledger.resume(st.options.resumed->by_explorer());
  }
  if (!st.jsonl) st.options.log->error("cannot write {}/metrics.jsonl", cfg.run.log_dir);
  // The actors it spawns here are linked to it: should it die (an
  // exception in a handler, a broken invariant), they die with it and the
  // launcher, which watches it, ends the run. Their own deaths reach it as
  // down messages (below); the exit messages of the links change nothing.
  self->set_exit_handler([](const caf::exit_msg&) {});
  // An exception in a handler ends it with the exception's text as the reason.
  self->set_exception_handler([](std::exception_ptr& x) -> caf::error {
    try {
      std::rethrow_exception(x);
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::runtime_error, std::string(e.what()));
    } catch (...) {
      return caf::make_error(caf::sec::runtime_error, std::string("an exception of unknown type"));
    }
  });
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.learner.address()) {
      if (st.end.finish_started) return;  // finish() stopped it on purpose
      st.options.log->error("the learner died: {}", caf::to_string(dm.reason));
      st.end.stopping = false;
      begin_stop(self, RunOutcome::failed, "the learner died (" + caf::to_string(dm.reason) + ")");
      return;
    }
    for (auto n = st.nodes.begin(); n != st.nodes.end(); ++n)
      if (n->second.address() == dm.source) {
        if (!st.end.finishing) st.options.log->warn("node '{}' went away ({})", n->first, caf::to_string(dm.reason));
        node_gone(self, std::string(n->first));
        if (st.end.finishing && st.nodes.empty()) send_done(self);
        return;
      }
    if (const auto id = explorer_id(st, dm.source))
      explorer_gone(self, *id, "died (" + caf::to_string(dm.reason) + ")", dm.reason != caf::exit_reason::normal);
  });
  try {
    spawn_cluster(self);
    self->delayed_send(self, report_period(cfg), tick_atom::value);
    self->send(self, beat_atom::value);  // nodes may join even a one-node topology
  } catch (const EnvFailure& e) {
    st.options.log->error("cannot start the environment: {}", e.what());
    if (st.options.on_core) st.options.on_core({}, {});
    caf::anon_send(st.options.launcher, done_atom::value, static_cast<int>(RunOutcome::failed),
                   std::string("cannot start the environment: ") + e.what());
    self->quit(caf::exit_reason::user_shutdown);  // after this function (the handlers below never run); what it
                                                  // spawned, linked, goes with it
  }
  return {
      [self](join_atom, const WireMsg& msg, explorer_actor who) {
        auto& st = self->state;
        auto j = decode_or_count<JoinData>(self, msg, st.errors, st.options.log);
        if (!j || !who) return;
        st.options.log->debug("{} {} joined from node {}", to_string(j->role), j->member_id, j->node);
        explorer_joined(self, *j, who);
      },
      [self](node_atom, const std::string& name, node_actor agent, std::uint32_t explorers,
             std::uint32_t envs_per_explorer, std::uint32_t rewards, bool rejoined) {
        node_entered(self, name, agent, explorers, envs_per_explorer, rewards, rejoined);
      },
      [self](refused_atom, const std::string&) { ++self->state.tally.joins_refused; },  // the gate logged it
      [self](eval_atom, std::uint64_t version, double pass_at_1, double mean_score, std::uint32_t tasks) {
        auto& st = self->state;
        if (st.eval.any && version < st.eval.version) return;
        st.eval = HeldOutScore{version, pass_at_1, mean_score, tasks, true};
        write_metrics_line(self);  // every score is in metrics.jsonl, however close together
      },
      [self](leave_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto l = decode_or_count<LeaveData>(self, msg, st.errors, st.options.log);
        if (!l) return;
        st.options.log->debug("{} {} left: {} ({} segments sent)", to_string(l->role), l->member_id, l->reason, l->sent);
        if (l->role == Role::explorer) st.ledger.left(l->member_id, l->sent);
      },
      [self](metrics_atom, const WireMsg& msg) {
        auto& st = self->state;
        auto m = decode_or_count<MetricsData>(self, msg, st.errors, st.options.log);
        if (!m) return;
        st.metrics = std::move(*m);
        st.metrics_at_s = st.elapsed();
        warn_vanished(st);
        note_first_segments(self);
        if (!st.end.stopping) check_stop(self);
      },
      [self](swap_atom, std::uint32_t, double us) {
        self->state.tally.swap_us_sum += us;
        ++self->state.tally.swaps;
        self->state.tally.swap_latency.observe(us * 1e-6);
      },
      [self](reward_latency_atom, std::uint32_t, double seconds) { self->state.tally.reward_latency.observe(seconds); },
      [self](tick_atom) {
        auto& st = self->state;
        caf::anon_send(st.options.launcher, tick_atom::value);  // alive: the launcher's watch (RunOptions::coordinator_bound)
        if (st.end.finishing) {
          if (std::chrono::steady_clock::now() >= st.end.deadline) {
            st.options.log->warn("{} member nodes did not stop in time", st.nodes.size());
            send_done(self);
            return;
          }
        } else if (st.end.stopping) {
          if (!st.end.finish_started && std::chrono::steady_clock::now() >= st.end.deadline) {
            // The run ends without them: what they made and the learner has
            // not received is lost, not in flight.
            for (const auto& [id, e] : st.explorers) st.ledger.dead(id);
            st.options.log->warn("{} explorers did not drain in time: what they hold is counted lost{}",
                                 st.explorers.size(),
                                 st.plan->explorers_awaited()
                                     ? fmt::format("; {} ordered never announced themselves", st.plan->explorers_awaited())
                                     : "");
            st.explorers.clear();
            finish(self);  // ticks go on: member nodes are awaited next
          }
        } else {
          write_metrics_line(self);
          auto s = make_status(self);
          if (st.options.on_status) st.options.on_status(s);
          st.last_tick_s = s.time_s;
          st.last_tick_steps = s.env_steps;
          check_stop(self);
          autoscale(self);
          if (!st.end.stopping && st.tally.explorers_joined == 0 && s.time_s >= st.options.config.launch.join_timeout_s)
            begin_stop(self, RunOutcome::failed,
                       fmt::format("no explorer joined within {} s ([launch] join_timeout_s)",
                                   st.options.config.launch.join_timeout_s));
        }
        self->delayed_send(self, report_period(st.options.config), tick_atom::value);
      },
      [self](stop_atom, const std::string& why) { begin_stop(self, RunOutcome::interrupted, why); },
      [self](unrecorded_atom, std::uint64_t count, const std::string& why) {
        // The rollout log took no more: stop ([record] on_error = "stop") or count it.
        auto& st = self->state;
        st.tally.unrecorded = std::max(st.tally.unrecorded, count);
        if (st.options.config.record.on_error == OnRecordError::stop)
          begin_stop(self, RunOutcome::failed, "the rollout log could not be written: " + why);
      },
      [self](beat_atom) { heartbeat(self); },
      [self](scale_atom, std::int32_t explorers, std::int32_t rewards) -> caf::result<std::string> {
        auto said = scale(self, explorers, rewards);
        if (!said) return to_caf(said.error());
        return *said;
      },
      [self](produced_atom, std::uint32_t explorer, std::uint64_t made) {
        auto& st = self->state;
        st.ledger.produced(explorer, made);
        const auto now = std::chrono::steady_clock::now();
        if (auto last = st.last_produced.find(explorer); last != st.last_produced.end()) {
          const double gap = std::min(120.0, std::chrono::duration<double>(now - last->second).count());
          st.segment_s = st.segment_s == 0 ? gap : 0.8 * st.segment_s + 0.2 * gap;
        }
        st.last_produced[explorer] = now;
      },
  };
}

}  // namespace coord

coordinator_actor spawn_coordinator(caf::actor_system& system, CoordinatorOptions options) {
  return system.spawn(coord::coordinator_impl, std::move(options));
}

const char* outcome_name(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::solved: return "solved";
    case RunOutcome::budget: return "budget";
    case RunOutcome::bad_input: return "bad_input";
    case RunOutcome::failed: return "failed";
    case RunOutcome::interrupted: return "interrupted";
  }
  return "unknown";
}

}  // namespace rlx
