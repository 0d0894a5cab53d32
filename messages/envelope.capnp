# The one wire type: every cross-process message is an Envelope.
@0xe682556ff0f01af1;
$import "/capnp/c++.capnp".namespace("rlx::wire");
using R = import "rollout.capnp";
using W = import "weights.capnp";
using E = import "env.capnp";
using Rw = import "reward.capnp";
using C = import "control.capnp";

const envelopeSchemaVersion :UInt16 = 1;

struct Envelope {
  schemaVersion @0 :UInt16;  # envelopeSchemaVersion of the sender
  sender @1 :Text;           # "role/id@node" of the sender, for error reports
  body :union {
    segment @2 :R.TrajectorySegment;
    weightSet @3 :W.WeightSet;
    weightChunk @4 :W.WeightChunk;
    weightsAvailable @5 :W.WeightsAvailable;
    weightRequest @6 :W.WeightRequest;
    envReset @7 :E.EnvReset;
    envStep @8 :E.EnvStep;
    envStepResult @9 :E.EnvStepResult;
    envSpec @10 :E.EnvSpec;
    rewardRequest @11 :Rw.RewardRequest;
    rewardResult @12 :Rw.RewardResult;
    join @13 :C.Join;
    leave @14 :C.Leave;
    heartbeat @15 :C.Heartbeat;
    metrics @16 :C.MetricsReport;
    scale @17 :C.ScaleCommand;
    record @18 :R.RolloutRecord;   # unused on the wire: the rollout log wraps records in log.capnp LogEntry
  }
}
