# The external-environment protocol: RLX talks to an environment process
# over its stdin/stdout, one request and one response at a time. Framing
# is either Cap'n Proto's standard stream framing or JSON lines (one
# object per line, Cap'n Proto's JSON mapping of these same structs), so
# a Python or shell program needs no Cap'n Proto library. docs/external-envs.md
# has a worked example. Integers are 32-bit so JSON carries them as numbers.
@0xcc3e6411bf14ce9d;
$import "/capnp/c++.capnp".namespace("rlx::wire");

const extenvSchemaVersion :UInt16 = 1;

# RLX -> environment process.
struct EnvRequest {
  union {
    spec @0 :Void;              # describe yourself: answer `spec`
    reset @1 :ResetRequest;     # (re)start every env: answer `result`
    step @2 :List(Int32);       # one action per env: answer `result`
    close @3 :Void;             # exit now; no answer
  }
}

struct ResetRequest {
  seed @0 :UInt32;        # base seed of the run
  firstEnvId @1 :UInt32;  # env i of this process is env firstEnvId + i of the run: seed it with seed + firstEnvId + i
  numEnvs @2 :UInt32;     # how many envs this process runs (B)
}

# Environment process -> RLX.
struct EnvResponse {
  union {
    spec @0 :ExternalSpec;  # the answer to `spec`
    result @1 :StepBatch;   # the answer to `reset` or `step`
    error @2 :Text;         # the env cannot go on; RLX restarts it (bounded)
  }
}

struct ExternalSpec {
  name @0 :Text;            # the env's name, for logs
  obsDim @1 :UInt32;        # floats per observation
  numActions @2 :UInt32;    # discrete actions 0..numActions-1
  maxEpisodeSteps @3 :UInt32;  # truncation limit (informational; 0 = none)
}

# B environments' results, env-major. An env whose episode ended resets
# itself: its observation is then the first of the next episode.
struct StepBatch {
  observations @0 :List(Float32);  # B * obsDim
  rewards @1 :List(Float32);       # B (zeros after a reset)
  terminated @2 :List(Bool);       # B
  truncated @3 :List(Bool);        # B
  hints @4 :List(Text);            # optional, B or empty: free-form per-env notes (logged at debug level)
  rewardPayloads @5 :List(Text);   # optional, B or empty: non-empty at an episode's end = its reward is
                                   # deferred; the text is what a reward worker scores (see docs/external-envs.md)
  finalObservations @6 :List(Float32); # optional, B * obsDim or empty: for an env whose episode a time limit
                                   # cut at this step (truncated, not terminated), the observation it was cut in
                                   # (observations holds the next episode's first); other envs' entries unused
}
