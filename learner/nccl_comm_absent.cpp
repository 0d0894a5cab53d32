// A build without NCCL (CMake found no nccl.h and libnccl): every entry
// point says so, and the learner group uses Gloo (learner/nccl_comm.hpp).
#include "learner/nccl_comm.hpp"

namespace rlx {

namespace {

Error absent() {
  return make_error(Errc::config_range,
                    "this build has no NCCL: configure with -DRLX_NCCL=ON where nccl.h and libnccl are found "
                    "(docs/data-parallel.md), or set [learner] collectives = \"gloo\"");
}

}  // namespace

bool nccl_built() { return false; }
Result<std::string> nccl_version() { return absent(); }
Result<std::vector<std::uint8_t>> nccl_unique_id() { return absent(); }

struct NcclComm::Impl {};

NcclComm::NcclComm(std::unique_ptr<Impl> impl, int rank, int world)
    : impl_(std::move(impl)), rank_(rank), world_(world) {}
NcclComm::~NcclComm() = default;

Result<std::unique_ptr<NcclComm>> NcclComm::create(const std::vector<std::uint8_t>&, int, int, int,
                                                   std::chrono::milliseconds) {
  return absent();
}

void NcclComm::all_reduce_sum(void*, std::size_t, NcclType) { throw NcclError(absent().message); }
void NcclComm::broadcast(void*, std::size_t, NcclType, int) { throw NcclError(absent().message); }

}  // namespace rlx
