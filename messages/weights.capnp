# Versioned weights: learner -> weight_store -> explorers.
@0xd4fcec63de781afb;
$import "/capnp/c++.capnp".namespace("rlx::wire");
using T = import "tensor.capnp";

const weightsSchemaVersion :UInt16 = 1;

struct NamedTensor {
  name @0 :Text;      # parameter name as the policy module names it, e.g. "actor.moe.router.weight"
  tensor @1 :T.Tensor;# the values
  continues @2 :Bool; # its rows go on in the next entry: a tensor over a Data blob's 2^29 - 1 bytes
                      # travels as consecutive entries of the same name, each whole rows of its first
                      # dimension (their shapes differ in that dimension alone), all but the last marked
}

# A whole set of policy weights of one version.
struct WeightSet {
  version @0 :UInt64;            # policy version; only grows
  policyKind @1 :Text;           # "moe_mlp" | "moe_transformer": the module these fit
  tensors @2 :List(NamedTensor); # every parameter, in module order
  checksum @3 :UInt64;           # xxh64 of the concatenated tensor data, in order
  createdUnixNs @4 :UInt64;      # when the learner published it
}

# One chunk of a serialised WeightSet, for sets that cross nodes in pieces.
struct WeightChunk {
  version @0 :UInt64;     # version of the set this chunk belongs to
  index @1 :UInt32;       # chunk number, from 0
  count @2 :UInt32;       # total number of chunks of this version
  totalBytes @3 :UInt64;  # size of the whole serialised WeightSet
  offset @4 :UInt64;      # byte offset of `data` within it
  data @5 :Data;          # the bytes
  checksum @6 :UInt64;    # of `data`, by `checksumKind`
  encoding @7 :ChunkEncoding;  # what `data` holds
  base @8 :UInt64;        # xorDelta: the version `data` is a delta against
  plainChecksum @9 :UInt64;    # xorDelta: of the chunk's bytes once the delta is applied, by `checksumKind`
  checksumKind @10 :ChunkChecksum;  # what `checksum` and `plainChecksum` are
}

# A chunk's checksum. Senders write crc64 (2.3x xxh64's speed here, with
# ISA-L's folding code); xxh64 is what senders before it wrote, still read.
enum ChunkChecksum {
  xxh64 @0;     # XXH64, seed 0
  crc64 @1;     # CRC-64/XZ (ECMA-182 polynomial, reflected, inverted in and out)
}

# How a chunk's `data` holds its slice of the set.
enum ChunkEncoding {
  raw @0;       # the bytes themselves
  xorDelta @1;  # zstd of (the bytes XOR the same slice of version `base`), transposed in
                # 4-byte groups first (every group's first bytes, then second bytes, ...;
                # a tail of under 4 bytes last, as it is): unchanged bytes are zeros and
                # the exponent bytes of floats that moved a little line up as runs. A base
                # shorter than the slice counts as zeros past its end.
}

# weight_store -> subscribers: a new version can be fetched.
struct WeightsAvailable {
  version @0 :UInt64;     # newest version held by the store
  totalBytes @1 :UInt64;  # size of its serialised WeightSet
  chunkCount @2 :UInt32;  # chunks it is served in across nodes
  chunkBytes @3 :UInt64;  # size of every chunk but the last (0: one chunk)
}

# explorer -> weight_store: ask for a version.
struct WeightRequest {
  version @0 :UInt64;     # the version wanted; ignored when `latest`
  latest @1 :Bool;        # true: the newest version held
  chunked @2 :Bool;       # true: only chunk `chunk` of that version (a WeightChunk answers)
  chunk @3 :UInt32;       # chunk number, from 0, when `chunked`
  hasBase @4 :Bool;       # the asker holds version `base` whole and can apply a delta against it
  base @5 :UInt64;        # (a store that holds `base` may answer a chunk as an xorDelta)
}
