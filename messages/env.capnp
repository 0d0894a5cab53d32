# Environment stepping: explorer <-> env actor. B environments per message.
@0xecf1a4da86d9af15;
$import "/capnp/c++.capnp".namespace("rlx::wire");
using T = import "tensor.capnp";

const envSchemaVersion :UInt16 = 1;

# explorer -> env: reset every environment (start of a run).
struct EnvReset {
  seed @0 :UInt64;        # base seed; env i uses seed + first env id + i
  numEnvs @1 :UInt32;     # B
}

# explorer -> env: one action for each of the B environments.
struct EnvStep {
  actions @0 :T.Tensor;   # int64 [B]
  stepIndex @1 :UInt64;   # explorer's step counter, echoed back
}

# env -> explorer: the result of a reset or a step. Environments that end
# an episode reset themselves; `observations` is then the first observation
# of the next episode.
struct EnvStepResult {
  observations @0 :T.Tensor; # float32 [B, obs_dim]
  rewards @1 :T.Tensor;      # float32 [B]; zeros after a reset
  terminated @2 :T.Tensor;   # uint8 [B]
  truncated @3 :T.Tensor;    # uint8 [B]
  stepIndex @4 :UInt64;      # echo of EnvStep.stepIndex (0 for a reset)
  lost @5 :T.Tensor;         # uint8 [B] (optional): 1 = episode cut by an environment failure
  rewardPayloads @6 :List(Text); # B or empty: non-empty at an episode's end = its reward is deferred (scored by a reward worker)
  finalObservations @7 :T.Tensor; # float32 [B, obs_dim] (optional): for an env whose episode a time limit cut at this
                                 # step (truncated, not terminated), the observation it was cut in; other rows unused
}

# env -> explorer: the shapes an environment uses.
struct EnvSpec {
  name @0 :Text;          # registry name, e.g. "cartpole"
  obsDim @1 :UInt32;      # length of one observation
  numActions @2 :UInt32;  # discrete action count
  maxEpisodeSteps @3 :UInt32; # truncation limit
}
