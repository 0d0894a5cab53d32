# The rollout log (<log_dir>/rollouts/): files of LogEntry messages in
# Cap'n Proto's standard stream framing, readable with no RLX code:
#   capnp decode messages/log.capnp LogEntry < rollouts-000000.capnp
# and, beside each, an index of IndexEntry messages (rollouts-000000.idx):
#   capnp decode messages/log.capnp IndexEntry < rollouts-000000.idx
# A closed file may be zstd-compressed whole (rollouts-000000.capnp.zst).
@0x9bef2cebff856fc5;
$import "/capnp/c++.capnp".namespace("rlx::wire");
using R = import "rollout.capnp";

const logSchemaVersion :UInt16 = 1;

# One record of the log, in the order the learner saw things happen.
struct LogEntry {
  seq @0 :UInt64;        # position in the whole log, from 0, no gaps, across files
  checksum @1 :UInt64;   # xxh64 (seed 0) of the canonical form of `body` (capnp canonicalize)
  body @2 :LogBody;
}

struct LogBody {
  union {
    start @0 :RunStart;          # a run (or a resumed run) began writing here
    rollout @1 :R.RolloutRecord; # a segment's arrival at the learner and its verdict
    weights @2 :WeightVersion;   # the learner published a version
    failedUpdate @3 :FailedUpdate; # the update on the batch just recorded failed: its segments were not trained
  }
}

# Segments are recorded as they arrive (a crash loses no admitted one), so
# a batch's update comes after its records: when it fails, this entry
# follows them and takes back their `trained` verdict.
struct FailedUpdate {
  learnerVersion @0 :UInt64;   # the version the update was to advance (unchanged)
  segments @1 :UInt32;         # the batch: the last this many rollout records of verdict trained
  reason @2 :Text;             # why the update failed
}

struct RunStart {
  schemaVersion @0 :UInt16;   # logSchemaVersion of the writer
  unixNs @1 :UInt64;          # wall clock at the start
  resumed @2 :Bool;           # true when a resumed run continues an existing log
  config @3 :Text;            # the run's TOML, verbatim (replay defaults to it)
  source @4 :Text;            # where the TOML came from
}

struct WeightVersion {
  version @0 :UInt64;          # the policy version published
  checksum @1 :UInt64;         # xxh64 over the weights' tensors in order (WeightSet.checksum)
  updates @2 :UInt64;          # learner updates so far
  publishedUnixNs @3 :UInt64;  # wall clock at publication
  numParameters @4 :UInt64;    # scalars in the weight set
}

# Where a record lies in its (uncompressed) file.
struct IndexEntry {
  seq @0 :UInt64;       # LogEntry.seq
  offset @1 :UInt64;    # byte offset of the framed message in the uncompressed file
  bytes @2 :UInt64;     # its framed length
  checksum @3 :UInt64;  # the entry's checksum (cross-checked on read)
  kind @4 :UInt8;       # 0 start, 1 rollout, 2 weights, 3 failed update
}
