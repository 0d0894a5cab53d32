# Deferred rewards: explorer -> reward pool -> explorer.
@0x87464db38d8deab1;
$import "/capnp/c++.capnp".namespace("rlx::wire");

const rewardSchemaVersion :UInt16 = 1;

struct RewardRequest {
  requestId @0 :UInt64;    # unique per explorer; echoed in the result
  explorerId @1 :UInt32;   # who asks
  task @2 :Text;           # task identifier (e.g. which problem was posed)
  payload @3 :Data;        # what to score: the episode's output (program text, answer...)
}

struct RewardResult {
  requestId @0 :UInt64;    # echo of RewardRequest.requestId
  score @1 :Float32;       # reward for the episode
  ok @2 :Bool;             # false when scoring itself failed (then score is 0)
  reason @3 :Text;         # why, when not ok or when a penalty applied
  hint @4 :Text;           # when the output failed: a failing input with its expected output, as a
                           # line to put before the task's prompt ("" none; at most 1024 bytes)
  seconds @6 :Float64;     # the scorer's own time on this request (sandbox included)
  failure @5 :UInt8;       # 0: the score is the program's outcome; else the machinery failed (an
                           # InfraFailure code, messages/types.hpp; ok is then false): not a score
}
