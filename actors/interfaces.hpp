// Typed interfaces of every RLX actor (CAF 0.17 syntax). A handle lists
// every message its actor accepts, so a wrong message is a compile error.
// Payloads that may cross nodes are WireMsg (an Envelope's bytes), plain
// integers/strings, or named structs with an inspect (GateEntry, ...),
// registered by name in register_handle_types.
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "actors/caf_errors.hpp"
#include "messages/caf_wire.hpp"
#include "messages/types.hpp"

namespace rlx {

using segment_atom = caf::atom_constant<caf::atom("segment")>;    // explorer -> learner
using ack_atom = caf::atom_constant<caf::atom("seg_ack")>;        // learner -> explorer: one credit back
using publish_atom = caf::atom_constant<caf::atom("publish")>;    // learner -> weight_store
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;        // explorer -> weight_store
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;// explorer -> weight_store
using weights_atom = caf::atom_constant<caf::atom("weights")>;    // weight_store -> explorer
using reset_atom = caf::atom_constant<caf::atom("env_reset")>;    // explorer -> env
using step_atom = caf::atom_constant<caf::atom("env_step")>;      // explorer -> env
using reward_atom = caf::atom_constant<caf::atom("reward")>;      // explorer -> reward
using record_atom = caf::atom_constant<caf::atom("record")>;      // learner -> recorder
using version_atom = caf::atom_constant<caf::atom("version")>;    // learner -> recorder: a version was published
using failed_atom = caf::atom_constant<caf::atom("upd_failed")>;  // learner -> recorder: the batch's update failed
using flush_atom = caf::atom_constant<caf::atom("flush")>;        // coordinator -> recorder
using join_atom = caf::atom_constant<caf::atom("join")>;          // member -> coordinator
using leave_atom = caf::atom_constant<caf::atom("leave")>;        // member -> coordinator
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;    // learner -> coordinator
using swap_atom = caf::atom_constant<caf::atom("swap")>;          // explorer -> coordinator: swap latency
using reward_latency_atom = caf::atom_constant<caf::atom("rewardlat")>;  // explorer -> coordinator: a reward's round trip
using drain_atom = caf::atom_constant<caf::atom("drain")>;        // coordinator -> explorer
using stepped_atom = caf::atom_constant<caf::atom("stepped")>;    // explorer -> itself: a local step is done
using stop_atom = caf::atom_constant<caf::atom("stop")>;          // anyone -> coordinator; coordinator -> node, learner
using tick_atom = caf::atom_constant<caf::atom("tick")>;          // coordinator -> itself, and to the launcher (alive)
using done_atom = caf::atom_constant<caf::atom("done")>;          // coordinator -> the launcher
using counts_atom = caf::atom_constant<caf::atom("counts")>;      // anyone -> actor: its error counters
using hello_atom = caf::atom_constant<caf::atom("hello")>;        // node -> gate: a nonce, please
using enter_atom = caf::atom_constant<caf::atom("enter")>;        // node -> gate: the proof; handles back
using node_atom = caf::atom_constant<caf::atom("node")>;          // gate -> coordinator: a node joined
using refused_atom = caf::atom_constant<caf::atom("refused")>;    // gate -> coordinator: a join was refused
using bulk_atom = caf::atom_constant<caf::atom("bulk")>;          // weight relay -> itself: a bulk fetch ended
using ping_atom = caf::atom_constant<caf::atom("ping")>;          // coordinator -> node: are you alive?
using beat_atom = caf::atom_constant<caf::atom("beat")>;          // coordinator -> itself: time to ping the nodes
using produced_atom = caf::atom_constant<caf::atom("produced")>;  // explorer -> coordinator: segments made so far
using scale_atom = caf::atom_constant<caf::atom("scale")>;        // rlx scale -> gate -> coordinator
using spawn_atom = caf::atom_constant<caf::atom("spawn")>;        // coordinator -> node: start rollout actors
using retire_atom = caf::atom_constant<caf::atom("retire")>;      // coordinator -> node: stop reward workers
using pause_atom = caf::atom_constant<caf::atom("pause")>;        // node -> explorer: the head is gone, hold on
using rebind_atom = caf::atom_constant<caf::atom("rebind")>;      // node -> explorer, relay: a restarted head
using forget_atom = caf::atom_constant<caf::atom("forget")>;      // node -> its weight store: drop every set
using rejoin_atom = caf::atom_constant<caf::atom("rejoin")>;      // reconnect helper -> node: the gate, or why not
using eval_atom = caf::atom_constant<caf::atom("eval")>;          // evaluator -> coordinator: a version's held-out score
using unrecorded_atom = caf::atom_constant<caf::atom("unrecord")>;  // recorder -> coordinator: records not written, why
using gateway_atom = caf::atom_constant<caf::atom("gateway")>;    // coordinator -> node: its gateway's counts

// What a spawn order starts (sent as its byte).
enum class FleetRole : std::uint8_t { explorer = 0, reward = 1 };

// Resets and steps B environments.
using env_actor = caf::typed_actor<caf::replies_to<reset_atom, WireMsg>::with<WireMsg>,
                                   caf::replies_to<step_atom, WireMsg>::with<WireMsg>,
                                   caf::replies_to<counts_atom>::with<std::uint64_t>>;

// Scores deferred rewards.
using reward_actor = caf::typed_actor<caf::replies_to<reward_atom, WireMsg>::with<WireMsg>,
                                      caf::replies_to<counts_atom>::with<std::uint64_t>>;

// Anything that follows new weight versions (explorers, weight relays).
using weights_listener = caf::typed_actor<caf::reacts_to<weights_atom, WireMsg>>;  // WeightsAvailable

// Trains. Segments in; metrics out on request. At the run's end (stop)
// it checkpoints its last update, then gives its final metrics.
using learner_actor = caf::typed_actor<caf::reacts_to<segment_atom, WireMsg>,
                                       caf::replies_to<metrics_atom>::with<WireMsg>,  // MetricsReport
                                       caf::replies_to<stop_atom>::with<WireMsg>,     // MetricsReport, the final one
                                       caf::replies_to<counts_atom>::with<std::uint64_t>>;

// Rolls out; receives weight notifications and credits. When its node
// loses the head: pause (hold every segment, take no step), then rebind
// to the restarted head's learner and coordinator (an untyped handle: the
// coordinator's interface names this one), with the newest version the
// restarted learner vouches for (anything above it was the dead head's).
using explorer_actor = caf::typed_actor<caf::reacts_to<weights_atom, WireMsg>,  // WeightsAvailable
                                        caf::reacts_to<ack_atom>,               // a segment was consumed
                                        caf::reacts_to<drain_atom>,             // finish the step, leave
                                        caf::reacts_to<stepped_atom>,           // (self) local env stepped
                                        caf::reacts_to<pause_atom>,
                                        caf::reacts_to<rebind_atom, learner_actor, caf::actor, std::uint64_t>,
                                        caf::replies_to<counts_atom>::with<std::uint64_t>>;

// Keeps the last N weight sets; forget drops them all.
using evaluator_actor = caf::typed_actor<caf::reacts_to<weights_atom, WireMsg>,  // WeightsAvailable
                                         caf::replies_to<counts_atom>::with<std::uint64_t>>;

using weight_store_actor = caf::typed_actor<caf::reacts_to<publish_atom, WireMsg>,                 // WeightSet
                                            caf::replies_to<fetch_atom, WireMsg>::with<WireMsg>,  // WeightRequest
                                            caf::reacts_to<subscribe_atom, weights_listener>,
                                            caf::reacts_to<forget_atom>,
                                            caf::replies_to<counts_atom>::with<std::uint64_t>>;

// Brings weight sets from the head's store to a member node's own store,
// chunk by chunk (actors/weight_relay.hpp). counts: chunks refetched.
// rebind: a restarted head's store and bulk port (0: none).
using weight_relay_actor = caf::typed_actor<caf::reacts_to<weights_atom, WireMsg>,
                                            caf::reacts_to<bulk_atom, std::uint64_t>,  // (self) version
                                            caf::reacts_to<rebind_atom, weight_store_actor, std::uint16_t>,
                                            caf::replies_to<counts_atom>::with<std::uint64_t>>;

// One segment's arrival at the learner, as the rollout log keeps it: the
// segment envelope and its verdict, learner version, admission index,
// lag and reason (messages/types.hpp).
struct RecordEntry {
  WireMsg segment;
  RolloutRecordData arrival;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RecordEntry& x) {
  auto& a = x.arrival;
  return f(caf::meta::type_name("rlx.record_entry"), x.segment, a.verdict, a.learner_version, a.admission_index, a.lag,
           a.reason);
}

// Appends to the rollout log: a segment's arrival and each published
// version (version, weights checksum, updates, parameters); a failed update
// (the version it was to advance, the batch's size, why).
using recorder_actor =
    caf::typed_actor<caf::reacts_to<record_atom, RecordEntry>,
                     caf::reacts_to<version_atom, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>,
                     caf::reacts_to<failed_atom, std::uint64_t, std::uint32_t, std::string>,
                     caf::replies_to<flush_atom>::with<std::uint64_t>>;  // closes the log; entries written

// A member node's agent (actors/member_node.hpp): told to stop when the
// run ends; drain: its explorers finish their step and leave, then it exits;
// ping: the head's heartbeat (reply: the explorers it runs). The
// coordinator decides what it runs: spawn (role, first id, first env id,
// count, envs per explorer) starts explorers or reward workers with the
// ids it allots; retire stops that many of its reward workers (explorers
// are drained by the coordinator itself). rejoin: its reconnect helper
// reached a (restarted) head's gate (an untyped handle: the gate's
// interface names this one), or says why it could not.
using node_actor = caf::typed_actor<caf::reacts_to<stop_atom, std::string>, caf::reacts_to<drain_atom>,
                                    caf::replies_to<ping_atom>::with<std::uint64_t>,
                                    // its gateway's counts (gateway_counts_vector), empty without one
                                    caf::replies_to<gateway_atom>::with<std::vector<std::uint64_t>>,
                                    caf::reacts_to<spawn_atom, std::uint8_t, std::uint32_t, std::uint64_t,
                                                   std::uint32_t, std::uint32_t>,
                                    caf::reacts_to<retire_atom, std::uint32_t>,
                                    caf::reacts_to<rejoin_atom, caf::actor>,
                                    caf::reacts_to<rejoin_atom, std::string>>;

// Membership, metrics, stopping.
using coordinator_actor = caf::typed_actor<caf::reacts_to<join_atom, WireMsg, explorer_actor>,
                                           // a node entered: name, agent, the explorers (with their envs
                                           // each) and reward workers it asks to run, or (rejoined) runs
                                           // already, having outlived the head it first joined
                                           caf::reacts_to<node_atom, std::string, node_actor, std::uint32_t,
                                                          std::uint32_t, std::uint32_t, bool>,
                                           caf::reacts_to<refused_atom, std::string>,
                                           caf::reacts_to<leave_atom, WireMsg>,
                                           caf::reacts_to<metrics_atom, WireMsg>,
                                           caf::reacts_to<swap_atom, std::uint32_t, double>,
                                           // explorer, seconds from a reward request to its answer
                                           caf::reacts_to<reward_latency_atom, std::uint32_t, double>,
                                           caf::reacts_to<tick_atom>,
                                           caf::reacts_to<beat_atom>,
                                           caf::reacts_to<produced_atom, std::uint32_t, std::uint64_t>,
                                           // version, pass@1, mean fraction of tests passed, tasks
                                           caf::reacts_to<eval_atom, std::uint64_t, double, double, std::uint32_t>,
                                           caf::reacts_to<stop_atom, std::string>,
                                           // records the rollout log did not take so far, and the first error
                                           caf::reacts_to<unrecorded_atom, std::uint64_t, std::string>,
                                           // explorers, reward workers wanted (-1: unchanged) -> what changed
                                           caf::replies_to<scale_atom, std::int32_t, std::int32_t>::with<std::string>>;

// The head's published door (control/gate.hpp): a node asks for a nonce,
// answers it with a proof of the cluster secret and the shape it asks for
// (a GateEntry), and only then gets a GateWelcome: the learner, weight
// store and coordinator, the port of the head's bulk channel for weights
// (0: none; transport/weight_bulk.hpp) and the run's configuration
// (TOML). `rlx scale` proves the secret the same way and asks for a new
// size. Membership: the run's id and the head process's incarnation come
// back with the handles, with the newest version the head's learner had
// when it started (a resumed learner's); a node that outlived its head
// gives the pair it had, to rejoin the restarted head with what it runs
// (refused for another run, or by the head that already counted it lost).
struct GateEntry {
  std::string node;   // the node's name in the cluster
  std::string nonce;  // the gate's answer to hello
  std::string proof;  // secret_proof(secret, nonce, node)
  node_actor agent;
  std::uint32_t explorers = 0;
  std::uint32_t envs_per_explorer = 0;
  std::uint32_t rewards = 0;  // reward workers
  std::string run_id;         // "" for a new node; a rejoining node's run and incarnation
  std::string incarnation;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GateEntry& x) {
  return f(caf::meta::type_name("rlx.gate_entry"), x.node, x.nonce, x.proof, x.agent, x.explorers,
           x.envs_per_explorer, x.rewards, x.run_id, x.incarnation);
}

struct GateWelcome {
  learner_actor learner;
  weight_store_actor weight_store;
  coordinator_actor coordinator;
  std::uint16_t bulk_port = 0;
  std::string config_toml;
  std::string run_id;
  std::string incarnation;
  std::uint64_t start_version = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GateWelcome& x) {
  return f(caf::meta::type_name("rlx.gate_welcome"), x.learner, x.weight_store, x.coordinator, x.bulk_port,
           x.config_toml, x.run_id, x.incarnation, x.start_version);
}

using gate_actor = caf::typed_actor<
    caf::replies_to<hello_atom, std::string>::with<std::string>,  // node name -> nonce
    caf::replies_to<enter_atom, GateEntry>::with<GateWelcome>,
    caf::replies_to<scale_atom, std::string, std::string, std::string, std::int32_t, std::int32_t>::with<
        std::string>>;  // caller, nonce, proof, explorers, reward workers

// Registers every handle type that crosses nodes inside messages.
inline void register_handle_types(caf::actor_system_config& cfg) {
  register_wire_types(cfg);
  register_error_category(cfg);
  cfg.add_message_type<learner_actor>("rlx.learner_actor");
  cfg.add_message_type<weight_store_actor>("rlx.weight_store_actor");
  cfg.add_message_type<coordinator_actor>("rlx.coordinator_actor");
  cfg.add_message_type<explorer_actor>("rlx.explorer_actor");
  cfg.add_message_type<weights_listener>("rlx.weights_listener");
  cfg.add_message_type<node_actor>("rlx.node_actor");
  cfg.add_message_type<GateEntry>("rlx.gate_entry");
  cfg.add_message_type<GateWelcome>("rlx.gate_welcome");
  cfg.add_message_type<RecordEntry>("rlx.record_entry");
  cfg.add_message_type<std::vector<std::uint64_t>>("rlx.u64_vector");
}

}  // namespace rlx
