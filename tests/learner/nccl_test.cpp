// NCCL for learner ranks on GPUs (learner/nccl_comm.hpp). On a machine
// without a GPU these check what a CPU can: the build's NCCL, unique ids,
// the rendezvous of the id through the store, and that every way NCCL
// cannot be had is a clear, bounded error. Where a GPU is visible (a CUDA
// build), the same cases run the collectives on it.
#include <future>
#include <regex>

#include "tests/torch_catch.hpp"
#include <torch/torch.h>

#include "learner/learner_group.hpp"
#include "learner/nccl_comm.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

bool error_has(const Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

std::unique_ptr<RendezvousStore> nccl_store() {
  auto s = RendezvousStore::serve("127.0.0.1", 0, 10s);
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace

TEST_CASE("the build says whether it has NCCL, and which", "[learner][nccl]") {
  auto v = nccl_version();
  if (nccl_built()) {
    REQUIRE(v.ok());
    CHECK(std::regex_match(*v, std::regex(R"(\d+\.\d+\.\d+)")));
  } else {
    REQUIRE_FALSE(v.ok());
    CHECK(error_has(v.error(), "this build has no NCCL"));
  }
}

TEST_CASE("NCCL unique ids are 128 fresh bytes and a wrong-sized one is refused", "[learner][nccl]") {
  if (!nccl_built()) {
    CHECK_FALSE(nccl_unique_id().ok());
    CHECK_FALSE(NcclComm::create(std::vector<std::uint8_t>(128), 0, 1, 0, 1s).ok());
    return;
  }
  auto a = nccl_unique_id();
  auto b = nccl_unique_id();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == 128);
  CHECK(*a != *b);
  auto bad = NcclComm::create(std::vector<std::uint8_t>(12), 0, 1, 0, 1s);
  REQUIRE_FALSE(bad.ok());
  CHECK(error_has(bad.error(), "12 bytes"));
  auto no_rank = NcclComm::create(*a, 3, 2, 0, 1s);
  REQUIRE_FALSE(no_rank.ok());
  CHECK(error_has(no_rank.error(), "no such rank"));
}

TEST_CASE("one NCCL rank joins on a GPU, or is refused with the reason without one", "[learner][nccl][gpu]") {
  if (!nccl_built()) return;
  auto id = nccl_unique_id();
  REQUIRE(id.ok());
  auto comm = NcclComm::create(*id, 0, 1, 0, 10s);
  if (!torch::cuda::is_available()) {
    // A CPU LibTorch cannot make device memory: this machine's case is the refusal.
    if (!comm.ok()) CHECK(error_has(comm.error(), "needs a visible GPU"));
    return;
  }
  REQUIRE(comm.ok());
  auto t = torch::arange(1000, torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA, 0));
  torch::cuda::synchronize(0);
  (*comm)->all_reduce_sum(t.data_ptr(), static_cast<std::size_t>(t.numel()), NcclType::f32);
  CHECK(t.cpu().equal(torch::arange(1000, torch::kFloat)));  // a sum over one rank
  auto b = torch::ones({64}, torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA, 0));
  (*comm)->broadcast(b.data_ptr(), 64, NcclType::bf16, 0);
  CHECK(b.cpu().to(torch::kFloat).sum().item<float>() == 64.0f);
}

TEST_CASE("a group's collectives are chosen from its device and the build", "[learner][dp][nccl]") {
  GroupOptions o;
  o.collectives = Collectives::automatic;
  REQUIRE(uses_nccl(o).ok());
  CHECK_FALSE(*uses_nccl(o));  // cpu
  o.device = "cuda:0";
  REQUIRE(uses_nccl(o).ok());
  CHECK(*uses_nccl(o) == nccl_built());
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  o.world = 2;  // two ranks on one GPU: NCCL would refuse them, auto takes Gloo
  CHECK_FALSE(*uses_nccl(o));
  o.device = "cuda";
  CHECK(*uses_nccl(o) == (nccl_built() && gpus >= 2));
  o.collectives = Collectives::gloo;
  CHECK_FALSE(*uses_nccl(o));
  o.collectives = Collectives::nccl;
  CHECK(uses_nccl(o).ok() == nccl_built());
  o.device = "cpu";
  auto cpu = uses_nccl(o);
  REQUIRE_FALSE(cpu.ok());
  CHECK(error_has(cpu.error(), "carries GPU tensors"));

  CHECK(device_for_rank("cpu", 3) == "cpu");
  CHECK(device_for_rank("cuda:1", 3) == "cuda:1");
  CHECK(device_for_rank("cuda", 3) == (gpus > 0 ? "cuda:" + std::to_string(3 % gpus) : "cuda"));
}

TEST_CASE("two ranks that ask for NCCL get the id through the store, then train or fail with the reason",
          "[learner][dp][nccl]") {
  auto s = nccl_store();
  auto options = [&](int rank) {
    GroupOptions o{rank, 2, "127.0.0.1", s->port(), 10s};
    o.device = "cuda";
    o.collectives = Collectives::nccl;
    return o;
  };
  auto other = std::async(std::launch::async, [&] { return LearnerGroup::join(options(1)); });
  auto first = LearnerGroup::join(options(0));
  auto second = other.get();
  const auto gpus = torch::cuda::device_count();
  if (!nccl_built() || gpus == 0) {
    // No hang and the reason: no NCCL in this build, or no GPU for it.
    REQUIRE_FALSE(first.ok());
    REQUIRE_FALSE(second.ok());
    const std::string why = nccl_built() ? "needs a visible GPU" : "this build has no NCCL";
    CHECK(error_has(first.error(), why));
    CHECK(error_has(second.error(), why));
    return;
  }
  if (gpus < 2) {
    // NCCL refuses two ranks on one GPU; the refusal must come, not a hang.
    CHECK_FALSE((first.ok() && second.ok()));
    return;
  }
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(std::string((*first)->transport()) == "nccl");
  auto averaged = [](LearnerGroup& g, int rank) {
    auto t = torch::full({300}, static_cast<float>(rank + 1), torch::TensorOptions().device(torch::kCUDA, rank));
    g.average({t});
    return t.cpu();
  };
  auto r1 = std::async(std::launch::async, [&] { return averaged(**second, 1); });
  auto r0 = averaged(**first, 0);
  CHECK(r0.equal(torch::full({300}, 1.5f)));
  CHECK(r1.get().equal(torch::full({300}, 1.5f)));
}
