#!/bin/bash
# The GPU measurement (docs/BENCHMARKS.md "On a GPU", issue 8) in one go,
# for a machine with an NVIDIA GPU and PyTorch: builds rlx-gpu-bench
# against PyTorch's CUDA LibTorch (the Debian stack is not needed there)
# and runs the MoE transformer's bf16 training step, the weight publish,
# the NCCL checks and the token learner's check and update on the GPU. Results (results.md, log.txt, gpu.txt) go to $OUT, else
# /tmp/rlx-gpu.
#
#   bash bench/gpu/run.sh
#
# It needs xxhash.h: /usr/include's, else the folder RLX_XXHASH_INCLUDE
# names, else .carry/include in this checkout (copy Debian's
# /usr/include/xxhash.h there and carry the folder to the GPU machine).
# With .carry/wire (bench/gpu/carry-wire.sh, after a build here) it also
# times the publish as a learner makes it (encode_module_weights).
# RLX_PEAK_TFLOPS: the GPU's dense bf16 peak for MFU (989, an H100/H200 SXM).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/rlx-gpu}
build=${RLX_GPU_BUILD:-/tmp/rlx-gpu-build}
peak=${RLX_PEAK_TFLOPS:-989}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1

inc=${RLX_XXHASH_INCLUDE:-}
if [ -z "$inc" ] && [ ! -f /usr/include/xxhash.h ]; then inc="$root/.carry/include"; fi
if [ -n "$inc" ] && [ ! -f "$inc/xxhash.h" ]; then
  echo "run.sh: no xxhash.h in $inc (set RLX_XXHASH_INCLUDE to a folder holding it)"
  exit 2
fi
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cuda_hint=()
if command -v nvcc > /dev/null; then
  cuda_hint=(-DCUDAToolkit_ROOT="$(dirname "$(dirname "$(command -v nvcc)")")")
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee "$out/gpu.txt" || true

# NCCL: PyTorch's nvidia-nccl wheel (nvidia/**/nccl.h), for rlx-nccl-check.
if [ -z "${NCCL_ROOT:-}" ]; then
  site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  nccl_h=$(find "$site/nvidia" -name nccl.h 2>/dev/null | head -1 || true)
  if [ -n "$nccl_h" ]; then export NCCL_ROOT=$(dirname "$(dirname "$nccl_h")"); fi
fi
echo "run.sh: NCCL_ROOT=${NCCL_ROOT:-none}"

# Cap'n Proto carried (bench/gpu/carry-wire.sh): the publish is also timed
# as a learner makes it.
wire=()
if [ -d "$root/.carry/wire/lib" ]; then wire=(-DRLX_WIRE_ROOT="$root/.carry/wire"); fi
cmake -S "$root/bench/gpu" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DRLX_XXHASH_INCLUDE="$inc" "${cuda_hint[@]}" "${wire[@]}"
# -k 0: a tool that does not build (reported above) leaves the others to run.
ninja -C "$build" -k 0 || echo "run.sh: some targets did not build (above); running those that did"
[ -x "$build/rlx-gpu-bench" ] || { echo "run.sh: rlx-gpu-bench did not build"; exit 1; }

md=$out/results.md
printf '| benchmark | measured | baseline | ratio | notes |\n|---|---|---|---|---|\n' > "$md"
bench=$build/rlx-gpu-bench
# A GPU-sized MoE (1024 wide, 8 layers, 8 experts top-2, 16 x 1024 tokens a
# step), then the code policy of examples/code.toml (64 x 256), in bf16;
# the GPU-sized one in fp32 for comparison.
"$bench" --device cuda --dtype bf16 --shape gpu --steps 20 --warmup 3 --matmul-n 8192 --peak-tflops "$peak" --md "$md"
"$bench" --device cuda --dtype bf16 --shape code --steps 20 --warmup 3 --matmul-n 8192 --peak-tflops "$peak" --md "$md"
"$bench" --device cuda --dtype fp32 --shape gpu --steps 10 --warmup 2 --matmul-n 8192 --md "$md"
# The learner's NCCL communicator: values, its bounded wait against raw
# NCCL, and a rank whose peer never comes (it must fail, not hang).
if [ -x "$build/rlx-nccl-check" ]; then
  "$build/rlx-nccl-check" --md "$md" || echo "run.sh: rlx-nccl-check FAILED ($?)"
else
  echo "run.sh: no NCCL found: rlx-nccl-check not built"
fi
# The token policy's learner on the GPU: agrees with the CPU trainer, and
# the code policy's GRPO update timed against the CPU's.
if [ -x "$build/rlx-gpu-token-check" ]; then
  "$build/rlx-gpu-token-check" --device cuda --md "$md" || echo "run.sh: rlx-gpu-token-check FAILED ($?)"
else
  echo "run.sh: rlx-gpu-token-check did not build"
fi
cat "$md"
