// rlx-nccl-check: the learner's NCCL communicator (learner/nccl_comm.hpp)
// on one GPU, for bench/gpu/run.sh. Checks that a one-rank all-reduce
// and broadcast leave the right values, times the all-reduce of the
// policy's gradient sizes through NcclComm against raw blocking NCCL
// calls in the same run (the cost of the bounded, polling wait), and
// checks that a rank whose peer never comes fails after its timeout
// instead of hanging. Writes table rows to --md. Exit 0: all checks held.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "bench/timing.hpp"
#include "learner/nccl_comm.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

// The median wall time of `reps` calls, after one to warm up.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> xs;
  for (int i = 0; i < reps; ++i) {
    const auto t = Clock::now();
    f();
    xs.push_back(seconds_since(t));
  }
  return median(xs);
}

bool check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string md;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--md") md = argv[i + 1];
  auto version = nccl_version();
  if (!version) {
    std::printf("%s\n", version.error().message.c_str());
    return 2;
  }
  std::printf("NCCL %s\n", version->c_str());
  auto id = nccl_unique_id();
  if (!id) return std::printf("%s\n", id.error().message.c_str()), 2;
  auto comm = NcclComm::create(*id, 0, 1, 0, 10s);
  if (!comm) return std::printf("%s\n", comm.error().message.c_str()), 2;
  bool ok = true;
  FILE* out = md.empty() ? nullptr : std::fopen(md.c_str(), "a");

  // Raw NCCL beside ours: a blocking communicator and cudaStreamSynchronize.
  ncclUniqueId raw_id;
  ncclGetUniqueId(&raw_id);
  ncclComm_t raw = nullptr;
  cudaSetDevice(0);
  ok &= check(ncclCommInitRank(&raw, 1, raw_id, 0) == ncclSuccess, "raw NCCL communicator");
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);

  for (std::size_t n : {std::size_t{38'535}, std::size_t{1} << 20, std::size_t{25} << 20}) {
    std::vector<float> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
    float* dev = nullptr;
    if (cudaMalloc(&dev, n * sizeof(float)) != cudaSuccess) return std::printf("cudaMalloc failed\n"), 2;
    cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    (*comm)->all_reduce_sum(dev, n, NcclType::f32);
    std::vector<float> back(n);
    cudaMemcpy(back.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost);
    ok &= check(back == host, "one-rank all-reduce of " + std::to_string(n) + " floats leaves them");
    const double ours = median_seconds(30, [&] { (*comm)->all_reduce_sum(dev, n, NcclType::f32); });
    const double bare = median_seconds(30, [&] {
      ncclAllReduce(dev, dev, n, ncclFloat32, ncclSum, raw, stream);
      cudaStreamSynchronize(stream);
    });
    std::printf("all-reduce %zu floats: NcclComm %.1f us, raw NCCL %.1f us\n", n, ours * 1e6, bare * 1e6);
    if (out)
      std::fprintf(out, "| NCCL all-reduce, 1 rank, %zu floats (NcclComm, bounded wait) | %.1f us | %.1f us raw blocking NCCL | %.2f | H200, NCCL %s |\n",
                   n, ours * 1e6, bare * 1e6, bare / ours, version->c_str());
    cudaFree(dev);
  }
  {
    std::vector<std::uint16_t> host(64, 0x3f80);  // bf16 ones
    void* dev = nullptr;
    cudaMalloc(&dev, 128);
    cudaMemcpy(dev, host.data(), 128, cudaMemcpyHostToDevice);
    (*comm)->broadcast(dev, 64, NcclType::bf16, 0);
    std::vector<std::uint16_t> back(64);
    cudaMemcpy(back.data(), dev, 128, cudaMemcpyDeviceToHost);
    ok &= check(back == host, "one-rank bf16 broadcast leaves the values");
    cudaFree(dev);
  }
  {
    // Rank 0 of 2 with no rank 1: init must give up after the timeout.
    auto lonely_id = nccl_unique_id();
    const auto t0 = Clock::now();
    auto lonely = NcclComm::create(*lonely_id, 0, 2, 0, 3s);
    const double s = seconds_since(t0);
    ok &= check(!lonely.ok() && s < 20, "a rank whose peer never comes fails after " + std::to_string(s) + " s: " +
                                            (lonely.ok() ? std::string("(joined?)") : lonely.error().message));
    if (out) std::fprintf(out, "| NCCL rank whose peer never comes (timeout 3 s) | fails after %.1f s | | | %s |\n", s,
                          lonely.ok() ? "joined?" : "no hang");
  }
  ncclCommDestroy(raw);
  cudaStreamDestroy(stream);
  if (out) std::fclose(out);
  return ok ? 0 : 1;
}
