#include "assembly/member_node.hpp"

#include "assembly/held_system.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "assembly/fleet.hpp"
#include "assembly/node_gateway.hpp"
#include "assembly/remote.hpp"
#include "actors/weight_relay.hpp"
#include "actors/weight_store.hpp"
#include "core/auth.hpp"
#include "envs/batch_env.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/threads.hpp"

namespace rlx {

namespace {

// What the agent reports back to run_member_node's thread.
struct Ending {
  std::mutex mu;
  RunOutcome outcome = RunOutcome::failed;
  std::string summary;
  void set(RunOutcome o, std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    outcome = o;
    summary = std::move(s);
  }
};

// A spawn order from the coordinator.
struct Order {
  FleetRole role = FleetRole::explorer;
  std::uint32_t first_id = 0;
  std::uint64_t first_env_id = 0;
  std::uint32_t count = 0;
  std::uint32_t envs_per_explorer = 0;
};

struct AgentState {
  const EnvRegistry* envs = nullptr;
  MemberNodeOptions options;
  ClusterConfig local;                   // this node's own file (how to reach the head: [tls])
  gate_actor gate;
  std::shared_ptr<Ending> ending;
  Logger log;
  // Set once the head let the node in: the run's config (the head's), what explorers need.
  std::optional<ClusterConfig> config;
  BatchEnvFactory factory;
  EnvSpec spec;
  std::shared_ptr<const Scorer> scorer;  // the run's [reward] scorer, for its reward workers
  FleetTargets targets;
  std::vector<Order> early;              // orders that arrived before the gate's answer
  std::vector<caf::actor> owned;         // everything it spawned, for the final exit
  std::vector<explorer_actor> explorers;
  std::vector<reward_actor> rewards;
  weight_relay_actor relay;
  weight_store_actor store;              // this node's
  std::shared_ptr<NodeGateway> gateway;  // tokens:gateway: the harnesses' endpoint for this node's explorers
  bool draining = false;
  // Membership, from the gate: the run and the head process it is in.
  std::string run_id, incarnation;
  bool orphaned = false;                 // the head went away; reaching it again
  std::chrono::steady_clock::time_point reconnect_until;  // when an orphaned node gives up
  gate_actor lost_gate;                  // the gate of the head it lost (never taken again)
  // Set when the agent ends: its reconnect helper stops retrying (the
  // actor system waits for it before the process can exit).
  std::shared_ptr<std::atomic<bool>> leaving = std::make_shared<std::atomic<bool>>(false);
};

using NodeSelf = node_actor::stateful_pointer<AgentState>;

void end(NodeSelf self, RunOutcome outcome, const std::string& summary) {
  auto& st = self->state;
  st.leaving->store(true);
  st.ending->set(outcome, summary);
  (outcome == RunOutcome::failed ? st.log->error("{}", summary) : st.log->info("{}", summary));
  if (st.gateway) {
    st.gateway->hub->close("the node left the run");  // every waiting turn answered before the explorers stop
    st.gateway->log->info("{}", st.gateway->summary());
    st.gateway.reset();
  }
  for (auto& a : st.owned) self->send_exit(a, caf::exit_reason::user_shutdown);
  self->quit();
}

void obey(NodeSelf self, const Order& order) {
  auto& st = self->state;
  if (!st.config) return st.early.push_back(order);
  if (st.draining) return;
  auto& sys = self->system();
  if (order.role == FleetRole::reward) {
    for (auto& r : spawn_rewards(sys, st.scorer, order.first_id, order.count, st.log)) {
      st.rewards.push_back(r);
      st.owned.push_back(caf::actor_cast<caf::actor>(r));
    }
    st.log->info("{} reward workers started ({} now)", order.count, st.rewards.size());
    return;
  }
  const ExplorerBatch batch{st.options.node, order.first_id, order.first_env_id, order.count, order.envs_per_explorer};
  st.targets.rewards = st.rewards;  // the reward workers it runs now
  for (auto& e : spawn_explorers(sys, *st.config, batch, st.factory, st.spec, st.targets, st.log)) {
    self->monitor(e);
    st.explorers.push_back(e);
    st.owned.push_back(caf::actor_cast<caf::actor>(e));
  }
  st.log->info("explorers {}..{} started ({} envs each; {} explorers now)", order.first_id,
               order.first_id + order.count - 1, order.envs_per_explorer, st.explorers.size());
}

void start(NodeSelf self, const GateWelcome& w) {
  auto& st = self->state;
  st.run_id = w.run_id;
  st.incarnation = w.incarnation;
  auto parsed = parse_config(w.config_toml, "<the head's configuration>", st.envs->names());
  if (!parsed) return end(self, RunOutcome::bad_input, "cannot use the head's configuration: " + parsed.error().message);
  const ClusterConfig& cfg = *parsed;
  if (cfg.token_run())
    if (auto t = check_tokenizer(cfg.tokens.tokenizer); !t)
      return end(self, RunOutcome::bad_input, "this node cannot read the run's tokenizer: " + t.error().message);
  self->monitor(w.coordinator);
  auto& sys = self->system();
  WeightStoreOptions wo{static_cast<std::size_t>(cfg.weight_store.keep_versions),
                        static_cast<std::uint64_t>(cfg.weight_store.chunk_kb) << 10,
                        child_logger(st.log, "weight_store")};
  wo.decode = weight_set_decoding(cfg.weight_store.max_set_bytes());
  auto store = spawn_weight_store(sys, wo);
  WeightRelayOptions ro;
  ro.upstream = w.weight_store;
  ro.local = store;
  ro.log = child_logger(st.log, "weight_relay");
  // The bulk channel (port 0: none) is on the host this node reached the gate at.
  BulkClientOptions bo;
  bo.host = st.options.head_host;
  bo.port = w.bulk_port;
  bo.node = st.options.node;
  bo.secret = st.options.secret;
  bo.timeout = std::chrono::seconds(10);
  ro.bulk = bo;
  auto relay = spawn_weight_relay(sys, ro);
  st.relay = relay;
  st.store = store;
  st.owned.push_back(caf::actor_cast<caf::actor>(store));
  st.owned.push_back(caf::actor_cast<caf::actor>(relay));
  try {
    st.factory = make_batch_env_factory(cfg.run.env, cfg.external, *st.envs, st.log);
    st.spec = st.factory(cfg.run.seed, 0, 1)->spec();
  } catch (const EnvFailure& e) {
    return end(self, RunOutcome::failed, std::string("cannot start the environment: ") + e.what());
  }
  auto scorer = make_scorer(cfg.reward.scorer);
  if (!scorer) return end(self, RunOutcome::failed, "cannot start reward workers: " + scorer.error().message);
  st.scorer = *scorer;
  // A gateway run: this node serves its own harnesses (gateway-NAME.json), decoded by its own explorers.
  auto gateway = start_node_gateway(cfg, st.options.secret, nullptr, st.log, st.options.node);
  if (!gateway) return end(self, RunOutcome::failed, "cannot serve the gateway: " + gateway.error().message);
  st.gateway = std::move(*gateway);
  st.targets = FleetTargets{w.learner, store, w.coordinator, {}, st.gateway ? st.gateway->hub : nullptr};
  st.config = std::move(*parsed);
  st.log->info("node '{}' joined the cluster; asked for {} explorers ({} envs each), {} reward workers",
               st.options.node, st.options.explorers, st.options.envs_per_explorer, st.options.rewards);
  for (const auto& order : std::exchange(st.early, {})) obey(self, order);
}

// Reaches the (restarted) head's gate from a thread of its own (connecting
// blocks) until reconnect_until, and tells the agent. Never answers with
// the dead head's gate.
void reconnect(NodeSelf self) {
  auto& st = self->state;
  const double left = std::chrono::duration<double>(st.reconnect_until - std::chrono::steady_clock::now()).count();
  if (left <= 0) return end(self, RunOutcome::failed, "the head went away and did not come back");
  self->spawn([agent = node_actor{self}, local = st.local, host = st.options.head_host, port = st.options.head_port,
               left, log = st.log, leaving = st.leaving, dead = st.lost_gate](caf::blocking_actor* helper, int) {
    auto gate = connect_gate(helper->system(), local, host, port, left, log, leaving.get(), dead);
    if (gate) caf::anon_send(agent, rejoin_atom::value, caf::actor_cast<caf::actor>(*gate));
    else caf::anon_send(agent, rejoin_atom::value, gate.error().message);
  }, 0);  // (an argument: CAF 0.17 binds a null tuple for an argument-less function actor; UBSan stops there)
}

// The head went away: explorers pause and the node reaches for it again,
// for [launch] reconnect_s at most.
void orphan(NodeSelf self) {
  auto& st = self->state;
  st.orphaned = true;
  st.lost_gate = st.gate;
  const double limit = st.config->launch.reconnect_s;
  st.reconnect_until =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit));
  st.log->warn("the head went away: explorers paused, their segments held; reaching {}:{} again for up to {} s",
               st.options.head_host, st.options.head_port, limit);
  for (auto& e : st.explorers) self->send(e, pause_atom::value);
  reconnect(self);
}

// A gate that did not answer (a head still starting, or gone again) is
// tried again while an orphaned node has time left; a refusal is final.
bool retry_gate(NodeSelf self, const caf::error& e) {
  auto& st = self->state;
  const bool unanswered = e == caf::sec::request_timeout || e == caf::sec::request_receiver_down;
  if (!st.orphaned || !unanswered || st.leaving->load() ||
      std::chrono::steady_clock::now() >= st.reconnect_until)
    return false;
  st.log->info("the head's gate did not answer ({}); reaching it again", self->system().render(e));
  reconnect(self);
  return true;
}

// The restarted head let the node back in: everything it runs follows it.
void rejoined(NodeSelf self, const GateWelcome& w) {
  auto& st = self->state;
  st.orphaned = false;
  st.incarnation = w.incarnation;
  self->monitor(w.coordinator);
  st.targets.learner = w.learner;
  st.targets.coordinator = w.coordinator;
  // In this order: the store forgets the dead head's sets before the relay
  // can publish the new head's or an explorer can ask for any.
  self->send(st.store, forget_atom::value);
  self->send(st.relay, rebind_atom::value, w.weight_store, w.bulk_port);
  for (auto& e : st.explorers)
    self->send(e, rebind_atom::value, w.learner, caf::actor_cast<caf::actor>(w.coordinator), w.start_version);
  st.log->info("rejoined the restarted head (its learner at v{}): {} explorers and {} reward workers go on",
               w.start_version,
               st.explorers.size(), st.rewards.size());
}

// Proves the secret at the gate and enters: the first time with the shape
// it asks for, after losing the head with the run and incarnation it had.
void enter(NodeSelf self) {
  auto& st = self->state;
  // Shorter for a node reaching a restarted head: an unanswered gate is tried again.
  const auto timeout = std::chrono::seconds(st.orphaned ? 10 : 30);
  self->request(st.gate, timeout, hello_atom::value, st.options.node)
      .then(
          [self, timeout](const std::string& nonce) {
            auto& st = self->state;
            const auto& o = st.options;
            GateEntry entry{o.node,
                            nonce,
                            secret_proof(o.secret, nonce, o.node),
                            node_actor{self},
                            o.explorers,
                            o.envs_per_explorer,
                            static_cast<std::uint32_t>(st.orphaned ? st.rewards.size() : o.rewards),
                            st.orphaned ? st.run_id : std::string(),
                            st.orphaned ? st.incarnation : std::string()};
            self->request(st.gate, timeout, enter_atom::value, std::move(entry))
                .then(
                    [self](const GateWelcome& w) {
                      if (self->state.orphaned) return rejoined(self, w);
                      start(self, w);
                    },
                    [self](const caf::error& e) {
                      if (retry_gate(self, e)) return;
                      end(self, self->state.orphaned ? RunOutcome::failed : RunOutcome::bad_input,
                          "the head refused this node: " + error_text(self->system(), e));
                    });
          },
          [self](const caf::error& e) {
            if (retry_gate(self, e)) return;
            end(self, RunOutcome::failed, "the head's gate did not answer: " + self->system().render(e));
          });
}

node_actor::behavior_type agent_impl(NodeSelf self, AgentState init) {
  if (init.options.stuck_agent.valid()) init.options.stuck_agent.wait();  // fault injection (tests)
  self->state = std::move(init);
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.targets.coordinator && dm.source == st.targets.coordinator.address()) {
      const std::string why = "the head went away (" + caf::to_string(dm.reason) + ")";
      if (st.draining || st.orphaned || !st.config || st.config->launch.reconnect_s <= 0)
        return end(self, RunOutcome::failed, why);
      return orphan(self);
    }
    auto it = std::find_if(st.explorers.begin(), st.explorers.end(),
                           [&](const explorer_actor& e) { return e.address() == dm.source; });
    if (it == st.explorers.end()) return;
    st.explorers.erase(it);
    if (st.draining && st.explorers.empty()) end(self, RunOutcome::interrupted, "drained and left the cluster");
  });
  enter(self);
  return {
      [self](stop_atom, const std::string& why) { end(self, RunOutcome::solved, "stopped by the head: " + why); },
      [self](ping_atom) { return static_cast<std::uint64_t>(self->state.explorers.size()); },
      [self](gateway_atom) {
        const auto& g = self->state.gateway;
        return g ? gateway_counts_vector(g->hub->counts()) : std::vector<std::uint64_t>{};
      },
      [self](drain_atom) {
        auto& st = self->state;
        if (st.draining) return;
        st.draining = true;
        // Without a head, nothing it holds can reach a learner.
        if (st.orphaned) return end(self, RunOutcome::interrupted, "left the cluster while the head was away");
        if (st.explorers.empty()) return end(self, RunOutcome::interrupted, "left the cluster");
        st.log->info("draining {} explorers", st.explorers.size());
        for (auto& e : st.explorers) self->send(e, drain_atom::value);
      },
      [self](spawn_atom, std::uint8_t role, std::uint32_t first_id, std::uint64_t first_env_id, std::uint32_t count,
             std::uint32_t envs_per_explorer) {
        const bool explorers = role == static_cast<std::uint8_t>(FleetRole::explorer);
        if (role > static_cast<std::uint8_t>(FleetRole::reward) || count == 0 || count > 4096 ||
            (explorers && (envs_per_explorer == 0 || envs_per_explorer > 65536)))
          return self->state.log->warn("ignored a malformed spawn order (role {}, count {}, envs {})", role, count,
                                       envs_per_explorer);
        obey(self, Order{static_cast<FleetRole>(role), first_id, first_env_id, count, envs_per_explorer});
      },
      [self](retire_atom, std::uint32_t count) {
        auto& st = self->state;
        for (; count > 0 && !st.rewards.empty(); --count) {  // explorers asking a stopped one ask the next
          self->send_exit(st.rewards.back(), caf::exit_reason::user_shutdown);
          st.rewards.pop_back();
        }
        st.log->info("reward workers retired ({} now)", st.rewards.size());
      },
      [self](rejoin_atom, caf::actor gate) {
        auto& st = self->state;
        if (!st.orphaned) return;
        st.gate = caf::actor_cast<gate_actor>(gate);
        enter(self);
      },
      [self](rejoin_atom, const std::string& why) {
        end(self, RunOutcome::failed, "the head went away and did not come back: " + why);
      },
  };
}

}  // namespace

MemberNodeResult run_member_node(const ClusterConfig& config, const EnvRegistry& envs, const MemberNodeOptions& options,
                                 const Logger& log) {
  configure_compute_threads(static_cast<int>(config.explorer.threads));
  MemberNodeResult result;
  MemberNodeOptions opts = options;
  const NodeConfig* node = config.node(options.node);
  if (!options.join) {
    if (!node || node->name == config.head().name) {
      result.outcome = RunOutcome::bad_input;
      result.summary = "'" + options.node + "' is not a member node of " + config.source;
      return result;
    }
    opts.explorers = static_cast<std::uint32_t>(node->explorers);
    opts.envs_per_explorer = static_cast<std::uint32_t>(node->envs_per_explorer);
    opts.rewards = static_cast<std::uint32_t>(node->rewards);
  }
  auto owned = std::make_shared<HeldSystem>();
  caf::actor_system_config& cfg = owned->cfg;
  configure_remoting(cfg, config);
  // A token run's reward workers hold a thread for a sandboxed program
  // each: they get their own, as on the head (actors/cluster.cpp). The
  // run's config comes from the head later; the node's own file says.
  const std::size_t cores = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", config.token_run() ? cores + 1 + opts.rewards : cores);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system& system = owned->system.emplace(cfg);
  auto gate = connect_gate(system, config, options.head_host, options.head_port, config.launch.connect_timeout_s, log);
  if (!gate) {
    result.summary = gate.error().message;
    return result;
  }
  auto ending = std::make_shared<Ending>();
  AgentState init;
  init.envs = &envs;
  init.options = opts;
  init.gate = *gate;
  init.local = config;
  init.ending = ending;
  init.log = log;
  auto agent = system.spawn(agent_impl, std::move(init));
  if (options.on_start) options.on_start([agent] { caf::anon_send(agent, drain_atom::value); });
  std::string stuck;
  {
    // Until the agent ends; and it must answer a ping within the bound:
    // one stuck in a handler would otherwise hold the process forever.
    caf::scoped_actor self{system};
    self->monitor(agent);
    auto answered = std::chrono::steady_clock::now();
    for (bool down = false; !down;) {
      self->receive([&](const caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(1)) >> [] {});
      if (down) break;
      self->request(agent, std::chrono::seconds(1), ping_atom::value)
          .receive([&](std::uint64_t) { answered = std::chrono::steady_clock::now(); }, [](caf::error&) {});
      const auto silent = std::chrono::steady_clock::now() - answered;
      if (silent < options.agent_bound) continue;
      stuck = fmt::format("the node's agent has not answered for {:.0f} s (stuck in a handler)",
                          std::chrono::duration<double>(silent).count());
      log->error("{}", stuck);
      self->send_exit(agent, caf::exit_reason::kill);  // taken when its handler returns, if ever
      break;
    }
  }
  if (options.on_start) options.on_start(nullptr);
  {
    std::lock_guard<std::mutex> lock(ending->mu);
    result.outcome = stuck.empty() ? ending->outcome : RunOutcome::failed;
    result.summary = options.node + ": " + (stuck.empty() ? ending->summary : stuck);
  }
  // Every actor the agent spawned was told to exit with it.
  if ((result.actors_left = actors_left_after(system, options.shutdown_bound, log, "the node's end"))) {
    result.outcome = RunOutcome::failed;
    result.summary += fmt::format(" (FAILED to end: {} actors did not exit)", result.actors_left);
    result.left_behind = owned;
  }
  return result;
}

}  // namespace rlx
