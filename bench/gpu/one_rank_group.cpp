// The standalone GPU build (bench/gpu/run.sh) trains one rank: the token
// trainer calls the learner group only when given one, which these tools
// never do. These definitions satisfy the linker without c10d's Gloo,
// whose headers a PyTorch installation need not ship.
#include "learner/learner_group.hpp"

namespace rlx {

void LearnerGroup::sum(const std::vector<at::Tensor>&) {
  throw GroupError("the standalone GPU build has no learner group");
}
void LearnerGroup::sum(at::Tensor&) { throw GroupError("the standalone GPU build has no learner group"); }
void LearnerGroup::reduce_gradients(const std::vector<at::Tensor>&, double) {
  throw GroupError("the standalone GPU build has no learner group");
}

}  // namespace rlx
