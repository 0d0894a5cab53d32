#!/bin/bash
# Fills .carry/wire with what the standalone GPU build needs to time the
# publish as a learner makes it (encode_module_weights): Cap'n Proto's and
# kj's headers and Debian's libraries, zstd's and ISA-L's, and the WeightSet schema's
# generated code from this checkout's build/. Run here, after a build;
# then carry .carry to the GPU machine (bench/gpu/run.sh finds it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
w=$root/.carry/wire
rm -rf "$w" && mkdir -p "$w/include" "$w/lib" "$w/gen/messages"
cp -r /usr/include/capnp /usr/include/kj /usr/include/zstd.h /usr/include/zstd_errors.h /usr/include/isa-l "$w/include/"
# Cap'n Proto 0.9's blob.h compares a const char* with a kj::StringPtr,
# which GCC 13 in C++20 refuses as ambiguous (the GPU machine's compiler;
# Debian's GCC 12 takes it): compare two StringPtrs in the carried copy.
sed -i 's/return a == b\.asString();/return kj::StringPtr(a) == b.asString();/; s/return a != b\.asString();/return kj::StringPtr(a) != b.asString();/' \
  "$w/include/capnp/blob.h"
lib=/usr/lib/x86_64-linux-gnu
for n in capnp kj; do cp "$(readlink -f $lib/lib$n.so)" "$w/lib/"; done
cp "$(readlink -f $lib/libzstd.so)" "$(readlink -f $lib/libisal.so)" "$w/lib/"
(cd "$w/lib" && for f in libcapnp-*.so libkj-*.so; do ln -sf "$f" "${f%%-*}.so"; done &&
  z=$(ls libzstd.so.*) && ln -sf "$z" libzstd.so && ln -sf "$z" libzstd.so.1 &&
  i=$(ls libisal.so.*) && ln -sf "$i" libisal.so && ln -sf "$i" libisal.so.2)
cp "$root"/build/messages/*.capnp.h "$root"/build/messages/*.capnp.c++ "$w/gen/messages/"
du -sh "$w"
