// The learner's compute: owns the policy and its optimizer, turns batches
// of admitted segments into updates (PPO with GAE and the decoupled
// correction, or V-trace actor-critic; for the token policy, token-level
// GRPO or PPO through learner/token_trainer.hpp), and counts the policy
// version.
// Single-threaded: owned by one learner actor (or a replay tool).
#pragma once

#include <memory>
#include <vector>

#include "core/config.hpp"
#include "learner/update_stats.hpp"
#include "messages/types.hpp"

namespace rlx {

class LearnerGroup;
class TokenTrainer;

struct TrainerOptions {
  LearnerConfig learner;
  PolicyConfig policy;
  std::int64_t obs_dim = 4;
  std::int64_t num_actions = 2;
  std::uint64_t seed = 1;
  // Data-parallel ranks (learner/learner_group.hpp); null when alone. The
  // ranks are given rank 0's whole state before their first update
  // together (LearnerCore::train, state_id below), average gradients before every
  // optimizer step and normalise advantages with statistics over all
  // ranks, so each stays identical. Not owned.
  LearnerGroup* group = nullptr;
  // The token policy (policy.kind "moe_transformer"): sampling settings
  // (log-probs are taken at the sampling temperature) and the per-token
  // staleness bound.
  TokensConfig tokens = {};
  std::uint64_t max_staleness = 4;
};

// Whether policy.init names weights this policy shape can start from (a
// clear error at start instead of a learner that cannot be built).
Result<bool> check_policy_init(const PolicyConfig& policy);

// Whether this build and machine can train on `device` ("cpu", "cuda",
// "cuda:N"): a clear error when CUDA is asked of a CPU-only LibTorch or a
// machine without a visible GPU.
Result<bool> check_device(const std::string& device);

class Trainer {
 public:
  explicit Trainer(const TrainerOptions& options);
  ~Trainer();

  // Why this trainer cannot train on `segment` ("" when it can): an
  // obs_dim other than the policy's, a token segment for the MLP policy or
  // one without tokens for the token policy. The learner's door refuses
  // such segments, so that no rank of a data-parallel group ever fails an
  // update its peers make.
  std::string refuses(const Segment& segment) const;

  // One update on `segments` (all admitted); the version then grows by 1.
  // A LibTorch error becomes an invalid_field error and the version stays.
  // REQUIRES: segments non-empty, each with obs_dim == options.obs_dim.
  Result<UpdateStats> update(const std::vector<const Segment*>& segments);

  std::uint64_t version() const { return version_; }
  // Sets the version counter (resume from a checkpoint).
  void set_version(std::uint64_t v) {
    version_ = v;
    renew_state_id();
  }
  // Names this trainer's state as it stands: unique in the process, new
  // when the trainer is made and whenever its state is set from outside
  // (load_state, set_version), unchanged by update(), which every rank
  // makes alike. Data-parallel ranks hold a copy of the state so named.
  std::uint64_t state_id() const { return state_id_; }
  WeightSetData weights() const;
  const TrainerOptions& options() const { return options_; }

  // The whole training state (parameters, optimizer moments, the
  // minibatch generator, the version) as bytes, and back: a restored
  // trainer continues bit-identically. load_state fails (and changes
  // nothing it has not validated) on bytes from another policy shape.
  std::vector<std::uint8_t> save_state() const;
  Result<bool> load_state(const std::vector<std::uint8_t>& bytes);

 private:
  struct Impl;  // LibTorch state, kept out of this header (compile time)
  TrainerOptions options_;
  std::unique_ptr<Impl> impl_;           // the MLP policy
  std::unique_ptr<TokenTrainer> tokens_;  // or the token policy
  std::uint64_t version_ = 0;
  std::uint64_t state_id_ = 0;
  void renew_state_id();
};

}  // namespace rlx
