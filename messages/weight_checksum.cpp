// WeightSetData's checksum, apart from the codec: the policy's weight
// export needs it, and bench/gpu builds that without Cap'n Proto.
#include <xxhash.h>

#include "messages/types.hpp"

namespace rlx {

std::uint64_t WeightSetData::compute_checksum() const {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const auto& t : tensors) XXH64_update(state, t.bytes(), t.byte_size());
  std::uint64_t h = XXH64_digest(state);
  XXH64_freeState(state);
  return h;
}

}  // namespace rlx
