# Trajectory segments: explorer -> learner, learner -> recorder.
@0xa426e0215ebd2566;
$import "/capnp/c++.capnp".namespace("rlx::wire");
using T = import "tensor.capnp";

const rolloutSchemaVersion :UInt16 = 1;

# T consecutive steps of the B environments of one explorer.
struct TrajectorySegment {
  explorerId @0 :UInt32;         # coordinator-assigned id of the producing explorer
  sequence @1 :UInt64;           # per-explorer sequence number, starts at 0, no gaps
  numSteps @2 :UInt32;           # T
  numEnvs @3 :UInt32;            # B
  observations @4 :T.Tensor;     # float32 [T, B, obs_dim]: the observation each action was chosen on
  actions @5 :T.Tensor;          # int64 [T, B]: discrete actions taken
  behaviourLogProbs @6 :T.Tensor;# float32 [T, B]: log pi_behaviour(action | observation)
  rewards @7 :T.Tensor;          # float32 [T, B]: reward received after the action
  terminated @8 :T.Tensor;       # uint8 [T, B]: 1 when the episode ended by termination at this step
  truncated @9 :T.Tensor;        # uint8 [T, B]: 1 when the episode was cut by a time limit at this step
  policyVersions @10 :List(UInt64); # [T]: version of the weights that chose the actions of each step
  bootstrapObservations @11 :T.Tensor; # float32 [B, obs_dim]: observation after the last step (for the value bootstrap)
  episodeReturns @12 :List(Float32);   # undiscounted returns of the episodes that ended inside this segment
  episodeLengths @13 :List(UInt32);    # their lengths in steps, same order as episodeReturns
  createdUnixNs @14 :UInt64;     # wall-clock time the segment was completed (explorer's clock)
  lostEpisodes @15 :UInt32;      # episodes cut by an environment failure (crash, timeout, bad output) in this segment
  tokens @16 :TokenRows;         # set by a token policy (observations are then [T, B, 0]; see TokenRows)
  masked @17 :T.Tensor;          # uint8 [T, B] or unset: 1 = the step's episode got no outcome because the
                                 # machinery failed (InfraFailure): no loss is computed on it
  maskedRows @18 :List(UInt8);   # the InfraFailure code of each masked episode
  infraFailures @19 :List(UInt32); # failures of the machinery this segment's episodes met (retried ones
                                 # too), counted by InfraFailure code (the index); empty: none
  rewardRetries @20 :UInt32;     # reward requests asked again for this segment's episodes
  truncationObservations @21 :T.Tensor; # float32 [K, obs_dim] or unset: for each step a time limit cut (truncated,
                                 # not terminated; t-major, then env), the observation the episode was cut in (the
                                 # value bootstrap's state); unset (older builds): the step's own observation stands in
  sentIndex @22 :UInt64;         # the explorer's count of segments sent, this one included (from 1; 0: an older
                                 # build): an index the learner never sees is a segment that vanished
  sentBase @23 :UInt64;          # the sentIndex its sending to this learner began at (1, or its first segment
                                 # to a restarted head)
  work @24 :SegmentWork;         # where the time that made this segment went (unset: not measured)
}

# Where an explorer's time went while it made a segment, and its scorers'
# time on the segment's rows. Agent rows' episodes outlive segments: their
# time is counted in the segment taken after it was spent.
struct SegmentWork {
  decodeSeconds @0 :Float64;     # stepping the policy (tool calls excluded)
  toolSeconds @1 :Float64;       # running the agents' tool calls in the sandbox
  scoreSeconds @2 :Float64;      # scoring its rows (in process, or the reward workers' own time)
  toolCalls @3 :UInt32;          # turns ended (each a tool call, or a call that could not run)
}

# A token policy's segment: B sequences (rows) of one decoding batch laid
# out time-major like any segment, T = prompt width + longest completion.
# actions = the tokens (prompts left-padded with 0, completions after
# them, 0 after a row's end); behaviourLogProbs = log pi of each sampled
# token (0 elsewhere); policyVersions = the version of each decoding step
# (rows decoded in lockstep: one version per column; the staleness
# contract holds per token), or, when rows were not in lockstep
# (continuous batching: versions set), the oldest version in each column. Row b's completion is steps
# [promptWidth, promptWidth + episodeLengths[b]); its reward sits on its
# last token, where terminated (it emitted end-of-sequence, or its agent
# episode ended) or truncated (it hit the length limit) is set. In a
# multi-turn episode the completion interleaves the policy's turns with
# the observations the environment appended (observed): those are
# context, never actions, and carry no log-probability.
struct TokenRows {
  promptWidth @0 :UInt32;          # P
  promptLengths @1 :List(UInt32);  # [B]: real prompt tokens of each row (<= P)
  routes @2 :T.Tensor;             # uint8 [T, B, layers * k]: experts per token and layer (255: none; 0 wide: dense)
  groupSize @3 :UInt32;            # rows come in groups of this many samples of one task
  taskIds @4 :List(Text);          # [B]: the task of each row (what its scorer needs)
  hints @5 :List(Text);            # [B] or empty: the scorer's hint for a failed row ("" none), a line
                                   # (a failing input with its expected output) to put before the prompt
  observed @6 :T.Tensor;           # uint8 [T, B] or unset (none): 1 = a completion token the environment
                                   # wrote (a tool's output): context, not an action; no loss on it
  versions @7 :List(UInt64);       # [T * B] (t-major) or empty: the version that sampled each token (0 on
                                   # tokens the policy did not choose); empty: policyVersions per column
}

# What happened to a segment at the learner.
enum Verdict {
  trained @0;       # admitted and used for an update
  droppedStale @1;  # lag > max_staleness at admission
  rejected @2;      # malformed: failed decoding or validation
}

# One record of the rollout log (recorder's stream).
struct RolloutRecord {
  verdict @0 :Verdict;            # outcome at the learner
  learnerVersion @1 :UInt64;      # learner's policy version at admission
  admissionIndex @2 :UInt64;      # order of arrival at the learner, from 0
  lag @3 :UInt64;                 # learnerVersion - oldest step version (0 when rejected)
  segment @4 :TrajectorySegment;  # the segment itself (absent when rejected)
  reason @5 :Text;                # human-readable reason for `rejected`/`droppedStale`
}
