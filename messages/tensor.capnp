# One tensor shape for every tensor on the wire.
@0x954318edde88dada;
$import "/capnp/c++.capnp".namespace("rlx::wire");

const tensorSchemaVersion :UInt16 = 1;

enum DType {
  float32 @0;   # IEEE-754 binary32, little-endian
  int64 @1;     # two's complement, little-endian
  uint8 @2;     # raw bytes (booleans are uint8 0/1)
  int32 @3;     # two's complement, little-endian
  bfloat16 @4;  # upper half of a binary32, little-endian
}

struct Tensor {
  dtype @0 :DType;          # element type of `data`
  shape @1 :List(UInt32);   # row-major dimensions; empty list = scalar
  data @2 :Data;            # product(shape) * sizeof(dtype) bytes, little-endian
}
