// The data-parallel group of learner ranks (LibTorch c10d over Gloo; NCCL
// for the tensors of ranks on GPUs, learner/nccl_comm.hpp).
// Rendezvous goes through a c10d TCPStore that the coordinator serves and
// whose address it hands to every rank; each update, rank 0 broadcasts
// the batch's segments, every rank trains on its own slice, and the
// gradients are averaged with one all-reduce before each optimizer step,
// so the ranks' weights stay identical and rank 0 publishes them.
// A rank that dies or stops answering fails the next collective with an
// error after `timeout` (never a hang). CAF-free; LibTorch stays in the .cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/choices.hpp"
#include "core/error.hpp"

namespace at {
class Tensor;
}

namespace rlx {

// The rendezvous store, served by the coordinator's process.
class RendezvousStore {
 public:
  // Listens on host:port (port 0: an ephemeral one; see port()).
  static Result<std::unique_ptr<RendezvousStore>> serve(const std::string& host, std::uint16_t port,
                                                        std::chrono::milliseconds timeout);
  ~RendezvousStore();
  std::uint16_t port() const;
  const std::string& host() const { return host_; }

 private:
  struct Impl;
  explicit RendezvousStore(std::unique_ptr<Impl> impl, std::string host);
  std::unique_ptr<Impl> impl_;
  std::string host_;
};

struct GroupOptions {
  int rank = 0;
  int world = 1;
  std::string host = "127.0.0.1";     // the rendezvous store's address
  std::uint16_t port = 0;
  std::chrono::milliseconds timeout{60'000};  // for the rendezvous and for every collective
  std::string device = "cpu";         // where the trainer's tensors live ([learner] device, this rank's)
  Collectives collectives = Collectives::automatic;  // [learner] collectives: auto | gloo | nccl
  std::string bind_host = {};         // this rank's own address, for its Gloo pairs (empty: `host`)
};

// Whether a group of `options` carries its tensors over NCCL: nccl asked
// for, or auto with a GPU device, NCCL built and a GPU for each rank
// (device "cuda" with at least `world` visible; else Gloo, which lets
// ranks share a GPU). An error for nccl that cannot be had (a CPU
// device, a build without NCCL).
Result<bool> uses_nccl(const GroupOptions& options);

// This rank's GPU: "cuda" (no index) becomes "cuda:<rank mod visible
// GPUs>", so ranks on one node spread over its GPUs; anything else stays.
std::string device_for_rank(const std::string& device, int rank);

class LearnerGroup {
 public:
  // Joins the group through the store at options.host:port (a client of
  // it, also in the process that serves it): returns once all `world`
  // ranks have joined and passed a barrier together, so the store may be
  // closed as soon as any rank's join returns; or fails after
  // options.timeout.
  static Result<std::unique_ptr<LearnerGroup>> join(const GroupOptions& options);
  ~LearnerGroup();

  int rank() const { return options_.rank; }
  int world() const { return options_.world; }
  // "gloo" or "nccl": what carries average and sum of tensors
  // (segments' bytes always go over Gloo).
  const char* transport() const;

  // Averages each tensor in place over the ranks (one all-reduce over
  // their concatenation). Every rank must pass tensors of the same shapes.
  void average(const std::vector<at::Tensor>& tensors);
  // Sums each tensor in place over the ranks (one all-reduce, as average).
  void sum(const std::vector<at::Tensor>& tensors);
  // The gradients of `parameters` averaged (each rank's loss a mean over
  // its own rows) or summed (each rank's loss its share of the whole
  // batch's) in place over the ranks, before an optimizer step. A
  // parameter without a gradient here (an expert no token of this rank
  // reached) gets zeros: another rank may have one, and every rank's
  // all-reduce must be the same shape.
  void average_gradients(const std::vector<at::Tensor>& parameters) { reduce_gradients(parameters, 1.0 / world()); }
  void sum_gradients(const std::vector<at::Tensor>& parameters) { reduce_gradients(parameters, 1.0); }
  // Sums `t` in place over the ranks.
  void sum(at::Tensor& t);
  // Rank 0 sends `bytes`; the others receive them (any length).
  void broadcast_bytes(std::vector<std::uint8_t>& bytes);

  // The collectives above throw GroupError when a rank is gone.

  // Which trainer state (Trainer::state_id) ranks 1..N-1 hold a copy of:
  // rank 0's LearnerCore sends its state when it differs (learner_core.cpp).
  std::uint64_t synced_state() const { return synced_state_; }
  void set_synced_state(std::uint64_t id) { synced_state_ = id; }

 private:
  void all_reduce(at::Tensor& t);  // sums a contiguous tensor in place
  void reduce_flat(const std::vector<at::Tensor>& tensors, double scale);  // sum x scale, in place
  void reduce_gradients(const std::vector<at::Tensor>& parameters, double scale);

  struct Impl;
  LearnerGroup(const GroupOptions& options, std::unique_ptr<Impl> impl);
  GroupOptions options_;
  std::unique_ptr<Impl> impl_;
  std::uint64_t synced_state_ = 0;
};

// A collective failed: a rank died, hung past the timeout or disagreed.
class GroupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rlx
