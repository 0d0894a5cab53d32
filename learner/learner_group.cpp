#include "learner/learner_group.hpp"

#include <cstring>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

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
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
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

}  // namespace

Result<std::unique_ptr<LearnerGroup>> LearnerGroup::join(const GroupOptions& o, RendezvousStore* local) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    return make_error(Errc::config_range, "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world));
  auto impl = std::make_unique<Impl>();
  try {
    c10::intrusive_ptr<c10d::Store> base;
    if (local) {
      base = local->impl_->store;
    } else {
      c10d::TCPStoreOptions so;
      so.port = o.port;
      so.isServer = false;
      so.timeout = o.timeout;
      base = c10::make_intrusive<c10d::TCPStore>(o.host, so);
    }
    impl->store = c10::make_intrusive<c10d::PrefixStore>("rlx-learners", base);
    auto opts = c10d::ProcessGroupGloo::Options::create(o.timeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.host));
    opts->threads = 1;
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, o.rank, o.world, opts);
  } catch (const std::exception& e) {
    return make_error(Errc::timeout, "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) +
                                         " could not join the learner group at " + o.host + ":" +
                                         std::to_string(o.port) + ": " + first_line(e.what()));
  }
  return std::unique_ptr<LearnerGroup>(new LearnerGroup(o, std::move(impl)));
}

void LearnerGroup::average(const std::vector<at::Tensor>& tensors) {
  if (options_.world == 1 || tensors.empty()) return;
  std::vector<at::Tensor> flat{torch::cat([&] {
    std::vector<at::Tensor> v;
    for (const auto& t : tensors) v.push_back(t.reshape({-1}));
    return v;
  }())};
  collective("all-reduce", [&] { impl_->pg->allreduce(flat)->wait(); });
  flat[0].div_(options_.world);
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(flat[0].narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

void LearnerGroup::sum(at::Tensor& t) {
  if (options_.world == 1) return;
  std::vector<at::Tensor> v{t};
  collective("all-reduce", [&] { impl_->pg->allreduce(v)->wait(); });
}

void LearnerGroup::broadcast(const std::vector<at::Tensor>& tensors) {
  if (options_.world == 1) return;
  for (const auto& t : tensors) {
    std::vector<at::Tensor> v{t};
    collective("broadcast", [&] { impl_->pg->broadcast(v)->wait(); });
  }
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
