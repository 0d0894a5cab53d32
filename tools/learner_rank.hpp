// `rlx learner-rank`: one data-parallel learner rank (1..N-1), started by
// the head (learner/learner_ranks.hpp), not by hand on this node.
#pragma once

#include <string>

namespace rlx {

struct LearnerRankArgs {
  std::string config;  // the run's TOML
  int rank = 1;
  int world = 2;
  std::string store;   // HOST:PORT of the rendezvous store
  std::string host;    // this rank's own address, for its Gloo pairs (empty: the store's host)
};

// 0: released by rank 0; 2: bad arguments or config; 4: the group broke.
int learner_rank_command(const LearnerRankArgs& args);

}  // namespace rlx
