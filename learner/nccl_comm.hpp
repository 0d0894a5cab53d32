// NCCL for learner ranks whose tensors live on a GPU: one communicator
// per rank, formed from a unique id that rank 0 makes and the rendezvous
// store hands to the others (learner_group.cpp). Every call is bounded:
// the communicator is non-blocking, and init or a collective that has not
// finished after `timeout` aborts the communicator and throws NcclError
// (a dead rank never hangs the group). Raw device pointers only: no
// LibTorch, no CAF. Compiled in when CMake finds nccl.h and libnccl
// (RLX_NCCL); without it every entry point reports that clearly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace rlx {

// Whether this build has NCCL; its version ("2.28.9"), or why there is none.
bool nccl_built();
Result<std::string> nccl_version();

// A fresh unique id (128 opaque bytes) for a new communicator: rank 0
// makes it and the store carries it. Needs no GPU.
Result<std::vector<std::uint8_t>> nccl_unique_id();

enum class NcclType { f32, f64, f16, bf16, i64, u8 };

// A collective failed, timed out or the communicator is broken.
class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NcclComm {
 public:
  // Joins the communicator of `world` ranks named by `id` as `rank`, on
  // GPU `device`. Fails with the reason (no GPU visible, bad id, a rank
  // that never came) after at most `timeout`.
  static Result<std::unique_ptr<NcclComm>> create(const std::vector<std::uint8_t>& id, int rank, int world,
                                                  int device, std::chrono::milliseconds timeout);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // In place on `count` elements at device pointer `data`; returns when
  // the result is in device memory. Throws NcclError.
  void all_reduce_sum(void* data, std::size_t count, NcclType type);
  void broadcast(void* data, std::size_t count, NcclType type, int root);

  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  struct Impl;
  NcclComm(std::unique_ptr<Impl> impl, int rank, int world);
  std::unique_ptr<Impl> impl_;
  int rank_;
  int world_;
};

}  // namespace rlx
