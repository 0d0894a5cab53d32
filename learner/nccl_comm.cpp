// NCCL communicators in non-blocking mode: every wait is a poll of the
// communicator's state (and of the stream) against a deadline, so a rank
// that died fails the call instead of hanging it (learner/nccl_comm.hpp).
#include "learner/nccl_comm.hpp"

#include <cstring>
#include <thread>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace rlx {

namespace {

using Clock = std::chrono::steady_clock;

std::string reason(ncclResult_t r, ncclComm_t comm = nullptr) {
  std::string s = ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last && *last) s += std::string(": ") + last;
  return s;
}

ncclDataType_t nccl_type(NcclType t) {
  switch (t) {
    case NcclType::f32: return ncclFloat32;
    case NcclType::f64: return ncclFloat64;
    case NcclType::f16: return ncclFloat16;
    case NcclType::bf16: return ncclBfloat16;
    case NcclType::i64: return ncclInt64;
    case NcclType::u8: return ncclUint8;
  }
  return ncclUint8;
}

// Short waits first (a collective of small tensors ends in microseconds),
// then 100 us naps so a long wait does not burn a core.
void pause(int& spins) {
  if (++spins < 1000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Waits while the communicator reports ncclInProgress; the final state,
// or ncclInProgress if `deadline` passed first.
ncclResult_t settle(ncclComm_t comm, ncclResult_t r, Clock::time_point deadline) {
  int spins = 0;
  while (r == ncclInProgress && Clock::now() < deadline) {
    pause(spins);
    if (ncclResult_t q = ncclCommGetAsyncError(comm, &r); q != ncclSuccess) return q;
  }
  return r;
}

}  // namespace

bool nccl_built() { return true; }

Result<std::string> nccl_version() {
  int v = 0;
  if (ncclResult_t r = ncclGetVersion(&v); r != ncclSuccess) return make_error(Errc::io, "NCCL: " + reason(r));
  // NCCL_VERSION(X,Y,Z) is X*10000 + Y*100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Result<std::vector<std::uint8_t>> nccl_unique_id() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
    return make_error(Errc::io, "NCCL cannot make a unique id: " + reason(r));
  return std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(id.internal),
                                   reinterpret_cast<const std::uint8_t*>(id.internal) + sizeof(id.internal));
}

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  std::chrono::milliseconds timeout{};
  bool broken = false;

  ~Impl() {
    if (comm) {
      if (broken) {
        ncclCommAbort(comm);
      } else {
        // Finalize flushes what was issued; abort if it does not settle.
        ncclResult_t r = ncclCommFinalize(comm);
        r = settle(comm, r, Clock::now() + timeout);
        if (r == ncclSuccess) {
          ncclCommDestroy(comm);
        } else {
          ncclCommAbort(comm);
        }
      }
    }
    if (stream) {
      cudaSetDevice(device);
      cudaStreamDestroy(stream);
    }
  }

  [[noreturn]] void fail(const char* what, const std::string& why) {
    broken = true;
    throw NcclError(std::string("NCCL ") + what + " failed (a rank died, stopped answering or disagreed): " + why);
  }

  // Issues one collective and waits until its result is in device memory.
  template <class Issue>
  void run(const char* what, Issue&& issue) {
    if (broken) throw NcclError(std::string("NCCL ") + what + ": the communicator broke in an earlier call");
    const auto deadline = Clock::now() + timeout;
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) fail(what, cudaGetErrorString(e));
    ncclResult_t r = settle(comm, issue(), deadline);
    if (r != ncclSuccess) fail(what, r == ncclInProgress ? "timed out being issued" : reason(r, comm));
    int spins = 0;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail(what, cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) fail(what, reason(async, comm));
      if (Clock::now() >= deadline)
        fail(what, "not done after " + std::to_string(timeout.count()) + " ms");
      pause(spins);
    }
  }
};

NcclComm::NcclComm(std::unique_ptr<Impl> impl, int rank, int world)
    : impl_(std::move(impl)), rank_(rank), world_(world) {}
NcclComm::~NcclComm() = default;

Result<std::unique_ptr<NcclComm>> NcclComm::create(const std::vector<std::uint8_t>& id, int rank, int world,
                                                   int device, std::chrono::milliseconds timeout) {
  const std::string me = "NCCL rank " + std::to_string(rank) + " of " + std::to_string(world);
  ncclUniqueId uid;
  if (id.size() != sizeof(uid.internal))
    return make_error(Errc::invalid_field, me + ": the unique id has " + std::to_string(id.size()) + " bytes, not " +
                                               std::to_string(sizeof(uid.internal)));
  if (world < 1 || rank < 0 || rank >= world) return make_error(Errc::config_range, me + ": no such rank");
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return make_error(Errc::config_range, me + " needs a visible GPU, and CUDA says: " + cudaGetErrorString(e));
  if (device < 0 || device >= count)
    return make_error(Errc::config_range, me + ": GPU " + std::to_string(device) + " asked for, " +
                                              std::to_string(count) + " visible");
  std::memcpy(uid.internal, id.data(), id.size());

  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->timeout = timeout;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return make_error(Errc::io, me + ": cannot use GPU " + std::to_string(device) + ": " + cudaGetErrorString(e));
  if (cudaError_t e = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking); e != cudaSuccess)
    return make_error(Errc::io, me + ": cannot make a CUDA stream: " + cudaGetErrorString(e));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&impl->comm, world, uid, rank, &config);
  if (impl->comm) r = settle(impl->comm, r, Clock::now() + timeout);
  if (r != ncclSuccess) {
    impl->broken = true;  // aborted by ~Impl
    return make_error(Errc::timeout, me + " could not join: " +
                                         (r == ncclInProgress ? "not every rank came within " +
                                                                    std::to_string(timeout.count()) + " ms"
                                                              : reason(r, impl->comm)));
  }
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(impl), rank, world));
}

void NcclComm::all_reduce_sum(void* data, std::size_t count, NcclType type) {
  impl_->run("all-reduce", [&] {
    return ncclAllReduce(data, data, count, nccl_type(type), ncclSum, impl_->comm, impl_->stream);
  });
}

void NcclComm::broadcast(void* data, std::size_t count, NcclType type, int root) {
  impl_->run("broadcast", [&] {
    return ncclBroadcast(data, data, count, nccl_type(type), root, impl_->comm, impl_->stream);
  });
}

}  // namespace rlx
