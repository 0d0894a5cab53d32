#include "learner/learner_group.hpp"

#include <cstring>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "core/child_process.hpp"
#include "learner/nccl_comm.hpp"

namespace rlx {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

RendezvousStore::RendezvousStore(std::unique_ptr<Impl> impl, std::string host)
    : impl_(std::move(impl)), host_(std::move(host)) {}
RendezvousStore::~RendezvousStore() = default;

std::uint16_t RendezvousStore::port() const { return impl_->store->getPort(); }

Result<std::unique_ptr<RendezvousStore>> RendezvousStore::serve(const std::string& host, std::uint16_t port,
                                                                std::chrono::milliseconds timeout) {
  try {
    c10d::TCPStoreOptions o;
    o.port = port;
    o.isServer = true;
    o.waitWorkers = false;
    o.timeout = timeout;
    auto impl = std::make_unique<Impl>();
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, o);
    return std::unique_ptr<RendezvousStore>(new RendezvousStore(std::move(impl), host));
  } catch (const std::exception& e) {
    return make_error(Errc::io, "cannot serve the learner rendezvous on " + host + ":" + std::to_string(port) + ": " +
                                    e.what());
  }
}

struct LearnerGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;  // segments' bytes, and tensors when nccl is null
  std::unique_ptr<NcclComm> nccl;                  // tensors on GPUs
};

LearnerGroup::LearnerGroup(const GroupOptions& options, std::unique_ptr<Impl> impl)
    : options_(options), impl_(std::move(impl)) {}
LearnerGroup::~LearnerGroup() = default;

namespace {

std::string first_line(const char* what) {
  std::string s = what;
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

template <class F>
void collective(const char* name, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw GroupError(std::string("learner group ") + name + " failed (a rank died or stopped answering): " +
                     first_line(e.what()));
  }
}

bool is_gpu(const std::string& device) { return device.rfind("cuda", 0) == 0; }

int device_index(const std::string& device) {
  const auto colon = device.find(':');
  return colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
}

NcclType nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat: return NcclType::f32;
    case torch::kDouble: return NcclType::f64;
    case torch::kHalf: return NcclType::f16;
    case torch::kBFloat16: return NcclType::bf16;
    case torch::kLong: return NcclType::i64;
    case torch::kByte: return NcclType::u8;
    default: throw GroupError(std::string("learner group: NCCL does not carry ") + c10::toString(t.scalar_type()));
  }
}

// Whether each rank gets a GPU of its own (NCCL refuses two ranks on one):
// "cuda" spreads the ranks over the visible GPUs (device_for_rank), "cuda:N"
// puts them all on N.
bool gpu_per_rank(const GroupOptions& o) {
  return o.world <= 1 || (o.device == "cuda" && static_cast<int>(torch::cuda::device_count()) >= o.world);
}

// The NCCL communicator of this rank: rank 0 makes the unique id, the
// store hands it to the others (a get waits up to the store's timeout).
Result<std::unique_ptr<NcclComm>> join_nccl(const GroupOptions& o, c10d::Store& store) {
  std::vector<std::uint8_t> id;
  try {
    if (o.rank == 0) {
      auto made = nccl_unique_id();
      if (!made) return made.error();
      id = std::move(*made);
      store.set("nccl-unique-id", id);
    } else {
      id = store.get("nccl-unique-id");
    }
  } catch (const std::exception& e) {
    return make_error(Errc::timeout, "rank " + std::to_string(o.rank) + " got no NCCL id through the store: " +
                                         first_line(e.what()));
  }
  auto comm = NcclComm::create(id, o.rank, o.world, device_index(device_for_rank(o.device, o.rank)), o.timeout);
  if (!comm && !gpu_per_rank(o))
    return make_error(comm.error().code, comm.error().message + " (NCCL takes a GPU per rank: " +
                                             std::to_string(o.world) + " ranks on device \"" + o.device + "\" with " +
                                             std::to_string(torch::cuda::device_count()) +
                                             " GPU(s) visible; collectives = \"gloo\" shares them)");
  return comm;
}

}  // namespace

Result<bool> uses_nccl(const GroupOptions& o) {
  if (o.collectives == Collectives::gloo) return false;
  if (o.collectives == Collectives::automatic) return is_gpu(o.device) && nccl_built() && gpu_per_rank(o);
  if (!is_gpu(o.device))
    return make_error(Errc::config_range, "collectives = \"nccl\" carries GPU tensors, but device is \"" + o.device + "\"");
  if (auto v = nccl_version(); !v) return v.error();
  return true;
}

std::string device_for_rank(const std::string& device, int rank) {
  if (device != "cuda") return device;
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  return gpus > 0 ? "cuda:" + std::to_string(rank % gpus) : device;
}

const char* LearnerGroup::transport() const { return impl_->nccl ? "nccl" : "gloo"; }

Result<std::unique_ptr<LearnerGroup>> LearnerGroup::join(const GroupOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    return make_error(Errc::config_range, "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world));
  auto nccl = uses_nccl(o);
  if (!nccl) return nccl.error();
  // A peer rank that dies closes its sockets; Gloo's next write to them
  // must fail (EPIPE: the group breaks, with its error) rather than end
  // this process with SIGPIPE's default action.
  ignore_sigpipe();
  auto impl = std::make_unique<Impl>();
  try {
    // A client even where this process serves the store: the group holds
    // no part of the server, which can then close once the group formed.
    c10d::TCPStoreOptions so;
    so.port = o.port;
    so.isServer = false;
    so.timeout = o.timeout;
    impl->store = c10::make_intrusive<c10d::PrefixStore>("rlx-learners", c10::make_intrusive<c10d::TCPStore>(o.host, so));
    auto opts = c10d::ProcessGroupGloo::Options::create(o.timeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.bind_host.empty() ? o.host : o.bind_host));
    opts->threads = 1;
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, o.rank, o.world, opts);
  } catch (const std::exception& e) {
    return make_error(Errc::timeout, "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) +
                                         " could not join the learner group at " + o.host + ":" +
                                         std::to_string(o.port) + ": " + first_line(e.what()));
  }
  if (o.world > 1 && *nccl) {
    auto comm = join_nccl(o, *impl->store);
    if (!comm) return comm.error();
    impl->nccl = std::move(*comm);
  }
  if (o.world > 1) {
    // A rank past this barrier knows every other rank has its pairs (and
    // its NCCL id): nobody needs the store any more.
    try {
      impl->pg->barrier()->wait();
    } catch (const std::exception& e) {
      return make_error(Errc::timeout, "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) +
                                           ": the ranks did not all reach the group's first barrier: " +
                                           first_line(e.what()));
    }
  }
  return std::unique_ptr<LearnerGroup>(new LearnerGroup(o, std::move(impl)));
}

void LearnerGroup::average(const std::vector<at::Tensor>& tensors) { reduce_flat(tensors, 1.0 / options_.world); }

void LearnerGroup::sum(const std::vector<at::Tensor>& tensors) { reduce_flat(tensors, 1.0); }

void LearnerGroup::reduce_gradients(const std::vector<at::Tensor>& parameters, double scale) {
  if (options_.world == 1) return;
  std::vector<at::Tensor> grads;
  for (at::Tensor p : parameters) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  reduce_flat(grads, scale);
}

void LearnerGroup::reduce_flat(const std::vector<at::Tensor>& tensors, double scale) {
  if (options_.world == 1 || tensors.empty()) return;
  std::vector<at::Tensor> flat{torch::cat([&] {
    std::vector<at::Tensor> v;
    for (const auto& t : tensors) v.push_back(t.reshape({-1}));
    return v;
  }())};
  all_reduce(flat[0]);
  if (scale != 1.0) flat[0].mul_(scale);
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(flat[0].narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

void LearnerGroup::sum(at::Tensor& t) {
  if (options_.world == 1) return;
  if (t.is_contiguous()) return all_reduce(t);
  at::Tensor c = t.contiguous();
  all_reduce(c);
  t.copy_(c);
}

void LearnerGroup::all_reduce(at::Tensor& t) {
  if (impl_->nccl && t.is_cuda()) {
    // NCCL runs on its own stream: the values must be ready on the
    // device first, and are when it returns (NcclComm waits).
    collective("all-reduce", [&] {
      torch::cuda::synchronize(t.device().index());
      impl_->nccl->all_reduce_sum(t.data_ptr(), static_cast<std::size_t>(t.numel()), nccl_type(t));
    });
    return;
  }
  std::vector<at::Tensor> v{t};
  collective("all-reduce", [&] { impl_->pg->allreduce(v)->wait(); });
}

void LearnerGroup::broadcast_bytes(std::vector<std::uint8_t>& bytes) {
  if (options_.world == 1) return;
  std::vector<at::Tensor> len{torch::tensor({static_cast<std::int64_t>(bytes.size())}, torch::kInt64)};
  collective("broadcast", [&] { impl_->pg->broadcast(len)->wait(); });
  const std::int64_t n = len[0].item<std::int64_t>();
  if (n < 0 || n > (std::int64_t{1} << 34)) throw GroupError("learner group broadcast: bad length " + std::to_string(n));
  if (options_.rank != 0) bytes.assign(static_cast<std::size_t>(n), 0);
  if (n == 0) return;
  std::vector<at::Tensor> data{torch::from_blob(bytes.data(), {n}, torch::kUInt8)};
  collective("broadcast", [&] { impl_->pg->broadcast(data)->wait(); });
}

}  // namespace rlx
