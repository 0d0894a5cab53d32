#include "actors/member_node.hpp"

#include <mutex>

#include "actors/fleet.hpp"
#include "actors/remote.hpp"
#include "actors/weight_relay.hpp"
#include "actors/weight_store.hpp"
#include "core/auth.hpp"
#include "envs/batch_env.hpp"
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

struct AgentState {
  const ClusterConfig* config = nullptr;
  const EnvRegistry* envs = nullptr;
  MemberNodeOptions options;
  gate_actor gate;
  std::shared_ptr<Ending> ending;
  Logger log;
  coordinator_actor coordinator;
  std::vector<caf::actor> owned;         // everything it spawned, for the final exit
  std::vector<explorer_actor> explorers;
  bool draining = false;
};

using Self = node_actor::stateful_pointer<AgentState>;

void end(Self self, RunOutcome outcome, const std::string& summary) {
  auto& st = self->state;
  st.ending->set(outcome, summary);
  (outcome == RunOutcome::failed ? st.log->error("{}", summary) : st.log->info("{}", summary));
  for (auto& a : st.owned) self->send_exit(a, caf::exit_reason::user_shutdown);
  self->quit();
}

void start_fleet(Self self, learner_actor learner, weight_store_actor head_store, coordinator_actor coordinator,
                 std::uint16_t bulk_port) {
  auto& st = self->state;
  const ClusterConfig& cfg = *st.config;
  const NodeConfig& node = *cfg.node(st.options.node);
  st.coordinator = coordinator;
  self->monitor(coordinator);
  auto& sys = self->system();
  auto store = spawn_weight_store(sys, WeightStoreOptions{static_cast<std::size_t>(cfg.weight_store.keep_versions),
                                                          static_cast<std::uint64_t>(cfg.weight_store.chunk_kb) << 10,
                                                          child_logger(st.log, "weight_store")});
  WeightRelayOptions ro;
  ro.upstream = head_store;
  ro.local = store;
  ro.log = child_logger(st.log, "weight_relay");
  if (bulk_port != 0) {
    // The bulk channel is on the host this node reached the gate at.
    BulkClientOptions bo;
    bo.host = st.options.head_host;
    bo.port = bulk_port;
    bo.node = st.options.node;
    bo.secret = st.options.secret;
    bo.timeout = std::chrono::seconds(10);
    ro.bulk = bo;
  }
  auto relay = spawn_weight_relay(sys, ro);
  st.owned.push_back(caf::actor_cast<caf::actor>(store));
  st.owned.push_back(caf::actor_cast<caf::actor>(relay));
  try {
    const BatchEnvFactory factory = make_batch_env_factory(cfg.run.env, cfg.external, *st.envs, st.log);
    const EnvSpec spec = factory(cfg.run.seed, 0, 1)->spec();
    Fleet fleet = spawn_fleet(sys, cfg, node, factory, spec, FleetTargets{learner, store, coordinator}, st.log);
    for (auto& r : fleet.rewards) st.owned.push_back(caf::actor_cast<caf::actor>(r));
    for (auto& e : fleet.explorers) {
      self->monitor(e);
      st.explorers.push_back(e);
      st.owned.push_back(caf::actor_cast<caf::actor>(e));
    }
  } catch (const EnvFailure& e) {
    return end(self, RunOutcome::failed, std::string("cannot start the environment: ") + e.what());
  }
  st.log->info("node '{}' joined the cluster: {} explorers, {} reward workers", node.name, node.explorers,
               node.rewards);
}

node_actor::behavior_type agent_impl(Self self, AgentState init) {
  self->state = std::move(init);
  auto& st = self->state;
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.coordinator.address())
      return end(self, RunOutcome::failed, "the head went away (" + caf::to_string(dm.reason) + ")");
    auto it = std::find_if(st.explorers.begin(), st.explorers.end(),
                           [&](const explorer_actor& e) { return e.address() == dm.source; });
    if (it == st.explorers.end()) return;
    st.explorers.erase(it);
    if (st.draining && st.explorers.empty()) end(self, RunOutcome::interrupted, "drained and left the cluster");
  });
  const auto timeout = std::chrono::seconds(30);
  self->request(st.gate, timeout, hello_atom::value, st.options.node)
      .then(
          [self, timeout](const std::string& nonce) {
            auto& st = self->state;
            const std::string proof = secret_proof(st.options.secret, nonce, st.options.node);
            self->request(st.gate, timeout, enter_atom::value, st.options.node, nonce, proof, node_actor{self})
                .then([self](learner_actor l, weight_store_actor w, coordinator_actor c, std::uint16_t bulk_port) {
                        start_fleet(self, l, w, c, bulk_port);
                      },
                      [self](const caf::error& e) {
                        end(self, RunOutcome::bad_input, "the head refused this node: " + self->system().render(e));
                      });
          },
          [self](const caf::error& e) {
            end(self, RunOutcome::failed, "the head's gate did not answer: " + self->system().render(e));
          });
  return {
      [self](stop_atom, const std::string& why) { end(self, RunOutcome::solved, "stopped by the head: " + why); },
      [self](ping_atom) { return static_cast<std::uint64_t>(self->state.explorers.size()); },
      [self](drain_atom) {
        auto& st = self->state;
        if (st.draining) return;
        st.draining = true;
        if (st.explorers.empty()) return end(self, RunOutcome::interrupted, "left the cluster");
        st.log->info("draining {} explorers", st.explorers.size());
        for (auto& e : st.explorers) self->send(e, drain_atom::value);
      },
  };
}

}  // namespace

MemberNodeResult run_member_node(const ClusterConfig& config, const EnvRegistry& envs, const MemberNodeOptions& options,
                                 const Logger& log) {
  configure_compute_threads(static_cast<int>(config.explorer.threads));
  MemberNodeResult result;
  const NodeConfig* node = config.node(options.node);
  if (!node || node->name == config.head().name) {
    result.outcome = RunOutcome::bad_input;
    result.summary = "'" + options.node + "' is not a member node of " + config.source;
    return result;
  }
  caf::actor_system_config cfg;
  configure_remoting(cfg, config);
  cfg.set("scheduler.max-threads", std::max<std::size_t>(2, std::thread::hardware_concurrency()));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{cfg};
  auto gate = connect_gate(system, config, options.head_host, options.head_port, config.launch.connect_timeout_s, log);
  if (!gate) {
    result.summary = gate.error().message;
    return result;
  }
  auto ending = std::make_shared<Ending>();
  AgentState init;
  init.config = &config;
  init.envs = &envs;
  init.options = options;
  init.gate = *gate;
  init.ending = ending;
  init.log = log;
  auto agent = system.spawn(agent_impl, std::move(init));
  if (options.on_start) options.on_start([agent] { caf::anon_send(agent, drain_atom::value); });
  {
    caf::scoped_actor self{system};
    self->monitor(agent);
    self->receive([](const caf::down_msg&) {});
  }
  if (options.on_start) options.on_start(nullptr);
  std::lock_guard<std::mutex> lock(ending->mu);
  result.outcome = ending->outcome;
  result.summary = options.node + ": " + ending->summary;
  return result;
}

}  // namespace rlx
