#!/usr/bin/env bash
# Installs the Debian 12 packages RLX needs (the comments say what each is for).
# Idempotent: only missing packages are installed. Run as root.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libcaf-dev capnproto libcapnp-dev
  libtorch-dev libopenblas0-pthread libgloo-dev
  libspdlog-dev catch2 libtomlplusplus-dev libcli11-dev
  libzstd-dev libxxhash-dev
  libjemalloc-dev  # the rlx binary's allocator: freed pages kept, not faulted in again every step (core/allocator.hpp)
  libisal-dev  # weight chunks' CRC-64 (ISA-L), near memory speed (messages/weight_chunks)
  libicu-dev  # Hugging Face tokenizers: NFC and the pre-tokenizer regexes (envs/tokens/hf_tokenizer)
  libcpp-httplib-dev  # the head's HTTP endpoint ([metrics]: Prometheus, the live page)
  nlohmann-json3-dev  # JSON: the live page's live.json
  chromium-headless-shell  # tests: the live page loaded in a real browser
  libprotobuf-dev protobuf-compiler  # TensorBoard's event files ([metrics] tensorboard)
  python3-prometheus-client  # tests: an independent parser of what /metrics serves
  python3   # examples/envs and tests/envs/fixtures: external environments; the interpreter of sandboxed programs
  bubblewrap  # the sandbox for model-written programs (envs/code/sandbox)
  gnuplot-nox zstd  # rlx inspect --plot / rlx plot; reading compressed logs by hand
  clang libclang-rt-14-dev  # libFuzzer targets of fuzz/ (tools/fuzz.sh)
  libssl-dev openssl  # cluster secret proofs (HMAC), TLS between nodes; tests make certificates
  iproute2  # [net] tests: nodes on separate network namespaces (ip netns)
  procps  # tests: pgrep/pkill find and kill node processes
  sentencepiece  # spm_train/spm_export_vocab: tools/train-tokenizer.sh and the test that holds our encoder to spm_encode
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "rlx: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
