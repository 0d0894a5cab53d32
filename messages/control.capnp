# Membership, metrics and scaling: everyone <-> coordinator.
@0xfa66ba085099ee6d;
$import "/capnp/c++.capnp".namespace("rlx::wire");

const controlSchemaVersion :UInt16 = 1;

enum Role {
  learner @0;
  weightStore @1;
  explorer @2;
  env @3;
  reward @4;
  recorder @5;
  evaluator @6;
}

# member -> coordinator: I am here.
struct Join {
  role @0 :Role;           # what the member is
  node @1 :Text;           # topology node it runs on
  memberId @2 :UInt32;     # id within its role (explorer id, rank...)
  authToken @3 :Data;      # proof of the cluster secret (used across nodes)
  firstEnvId @4 :UInt64;   # an explorer: id of its first environment
  numEnvs @5 :UInt32;      # an explorer: its environments
  rejoined @6 :Bool;       # an explorer that outlived the head it joined, joining the restarted one
  produced @7 :UInt64;     # rejoined: segments it made in its life
  kept @8 :UInt64;         # rejoined: of those, held and still to be sent
}

# member -> coordinator: I am leaving on purpose (drain finished).
struct Leave {
  role @0 :Role;
  memberId @1 :UInt32;
  reason @2 :Text;         # e.g. "scaled down", "run stopped"
  sent @3 :UInt64;         # an explorer: the segments it sent to learners in its life
}

# member -> coordinator: I am alive.
struct Heartbeat {
  role @0 :Role;
  memberId @1 :UInt32;
  sentUnixNs @2 :UInt64;   # sender clock
}

# learner -> coordinator: counters, sent after every update and on request.
struct MetricsReport {
  envSteps @0 :UInt64;            # steps in all segments received (any verdict)
  episodes @1 :UInt64;            # episodes finished inside received segments
  meanReturn @2 :Float32;         # mean return of the last 100 episodes (NaN before any)
  policyVersion @3 :UInt64;       # learner's version
  segmentsReceived @4 :UInt64;    # every segment that arrived
  segmentsTrained @5 :UInt64;     # admitted and trained on
  segmentsDroppedStale @6 :UInt64;# dropped: lag > max_staleness
  segmentsRejected @7 :UInt64;    # malformed
  lagMean @8 :Float32;            # mean lag of trained segments since the previous report
  lagMax @9 :UInt64;              # max lag of trained segments since the previous report
  lagHistogram @10 :List(UInt64); # trained steps by lag 0..max_staleness (cumulative)
  ratioMean @11 :Float32;         # mean behaviour importance ratio of the last update
  ratioMax @12 :Float32;          # its maximum
  truncatedFraction @13 :Float32; # fraction of ratios truncated at rho_bar in the last update
  policyLoss @14 :Float32;        # last update's policy loss
  valueLoss @15 :Float32;         # last update's value loss
  entropy @16 :Float32;           # last update's mean policy entropy
  loadBalanceLoss @17 :Float32;   # MoE auxiliary loss of the last update
  expertUtilisation @18 :List(Float32); # fraction of routed tokens per expert, last update
  updates @19 :UInt64;            # optimizer updates done
  weightSwapMeanUs @20 :Float32;  # mean explorer weight-swap latency reported so far (0 if none)
  episodesLost @21 :UInt64;       # episodes cut by environment failures (not counted in returns)
  segmentsByExplorer @22 :List(ExplorerSegments); # segments received from each explorer (any verdict)
  busySeconds @23 :Float64;       # wall time the learner spent on segments and updates (not waiting), cumulative
  routeMismatch @24 :Float32;     # token policy: fraction of (token, layer) the learner routed otherwise than the rollout, last update
  staleTokens @25 :UInt64;        # token policy: generated tokens past the staleness bound (not trained), cumulative
  hintKl @26 :Float32;            # token policy: KL(teacher with hint || student) per hinted token, last update
  hintedRows @27 :UInt64;         # token policy: rows distilled from their scorer's hint, cumulative
  skippedRows @28 :UInt64;        # token policy: rows of zero advantage not computed (GRPO), cumulative
  rewardRetries @29 :UInt64;      # reward requests asked again after a failure of the machinery, cumulative
  rowsMasked @30 :UInt64;         # episodes masked out of the update (no outcome: InfraFailure), cumulative
  infraFailures @31 :List(UInt64);# failures of the machinery met, by InfraFailure code (the index), cumulative
  arrivalsByExplorer @32 :List(ExplorerArrivals); # what each explorer's segment numbers show (learner/segment_arrivals.hpp)
  segmentsUpdateFailed @33 :UInt64; # admitted to a batch whose update failed (not counted trained)
  # Where the explorers' and scorers' time went (rollout.capnp SegmentWork),
  # summed over the segments received, cumulative:
  decodeSeconds @34 :Float64;
  toolSeconds @35 :Float64;
  scoreSeconds @36 :Float64;
  toolCalls @37 :UInt64;
  policyTokens @38 :UInt64;       # token policies: tokens the policy sampled (envSteps less the observed ones)
  referenceKl @39 :Float32;       # token policy: KL(policy || the run's start) per trained token, last update
  samplerMismatch @40 :Float32;   # token policy: mean |log p learner - log p sampler| over tokens sampled by the learner's own version, last update
}

struct ExplorerArrivals {
  explorer @0 :UInt32;            # explorer id
  accounted @1 :UInt64;           # the highest of its sent indices accounted for (arrived, unreadable or vanished)
  vanished @2 :UInt64;            # its indices that never arrived although later ones did
}

struct ExplorerSegments {
  explorer @0 :UInt32;            # explorer id
  segments @1 :UInt64;            # segments the learner received from it
}

# user -> coordinator: change the size of the rollout fleet.
struct ScaleCommand {
  explorers @0 :Int32;     # wanted number of explorers; -1 = unchanged
  rewards @1 :Int32;       # wanted number of reward workers; -1 = unchanged
  node @2 :Text;           # node to act on; empty = any
}
