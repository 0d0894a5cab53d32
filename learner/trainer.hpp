// The learner's compute behind one interface: a trainer owns a policy and
// its optimizer, refuses segments it cannot train on, turns batches of
// admitted segments into updates, counts the policy version, exports the
// weights and saves or restores its whole state. Two implementations:
// learner/mlp_trainer.hpp (the MLP policy: PPO with GAE and the decoupled
// correction, or V-trace actor-critic) and learner/token_policy_trainer.hpp
// (the token policy: token-level GRPO or PPO through
// learner/token_trainer.hpp). make_trainer picks one by policy.kind.
// Single-threaded: owned by one learner core (or a replay tool). CAF-free.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "learner/update_stats.hpp"
#include "messages/codec.hpp"
#include "messages/types.hpp"

namespace torch::serialize {
class OutputArchive;
class InputArchive;
}  // namespace torch::serialize

namespace rlx {

class LearnerGroup;

struct TrainerOptions {
  LearnerConfig learner;
  PolicyConfig policy;
  std::int64_t obs_dim = 4;
  std::int64_t num_actions = 2;
  std::uint64_t seed = 1;
  // Data-parallel ranks (learner/learner_group.hpp); null when alone. The
  // ranks are given rank 0's whole state before their first update
  // together (LearnerCore::train, state_id below), reduce gradients before
  // every optimizer step and normalise advantages with statistics over all
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
Result<void> check_policy_init(const PolicyConfig& policy, const TokensConfig& tokens);

// Whether this build and machine can train on `device` ("cpu", "cuda",
// "cuda:N"): a clear error when CUDA is asked of a CPU-only LibTorch or a
// machine without a visible GPU.
Result<void> check_device(const std::string& device);

class Trainer {
 public:
  virtual ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Why this trainer cannot train on `segment` ("" when it can): an
  // obs_dim other than the policy's, a token segment for the MLP policy or
  // one without tokens for the token policy. The learner's door refuses
  // such segments, so that no rank of a data-parallel group ever fails an
  // update its peers make.
  virtual std::string refuses(const Segment& segment) const = 0;

  // One update on `segments` (all admitted); the version then grows by 1.
  // A segment it refuses, or a LibTorch error, is an invalid_field error
  // and the version stays (the weights too, unless an optimizer step
  // already ran). REQUIRES: segments non-empty.
  Result<UpdateStats> update(const std::vector<const Segment*>& segments);

  // The current weights, labelled with version() and checksummed.
  virtual WeightSetData weights() const = 0;
  // The same weights as the WeightSet message a learner publishes,
  // stamped `created_unix_ns`: encoded straight from the parameters
  // (policy/weights_wire.hpp) by the trainers here; by default from
  // weights().
  virtual EncodedWeightSet encoded_weights(std::uint64_t created_unix_ns) const;

  std::uint64_t version() const { return version_; }
  // Sets the version counter (resume from a checkpoint).
  void set_version(std::uint64_t v);
  // Names this trainer's state as it stands: unique in the process, new
  // when the trainer is made and whenever its state is set from outside
  // (load_state, set_version), unchanged by update(), which every rank
  // makes alike. Data-parallel ranks hold a copy of the state so named.
  std::uint64_t state_id() const { return state_id_; }

  // The whole training state (parameters, optimizer moments, the
  // implementation's own state, the version) as bytes, and back: a
  // restored trainer continues bit-identically. load_state fails with an
  // invalid_field error on bytes from another policy shape.
  std::vector<std::uint8_t> save_state() const;
  // The same bytes through `sink`, piece by piece in order (it returns how
  // many it took: all of them, or 0 when it failed, which throws
  // c10::Error here), never whole in memory: a checkpoint streams them
  // into its file.
  void write_state(const std::function<std::size_t(const void*, std::size_t)>& sink) const;
  Result<void> load_state(std::span<const std::uint8_t> bytes);

 protected:
  // `device`: where the trainer's tensors live (load_state reads there).
  explicit Trainer(std::string device);
  // The update's compute (version() is the version before it). May throw
  // c10::Error, which update() turns into an error.
  virtual UpdateStats train(const std::vector<const Segment*>& segments) = 0;
  // The implementation's part of the state, under its own keys.
  virtual void save(torch::serialize::OutputArchive& archive) const = 0;
  virtual Result<void> load(torch::serialize::InputArchive& archive) = 0;

 private:
  void renew_state_id();
  std::string device_;
  std::uint64_t version_ = 0;
  std::uint64_t state_id_ = 0;
};

// The trainer for options.policy.kind: the token policy's for
// "moe_transformer" (started from policy.init, on rank 0, when set), the
// MLP policy's otherwise.
std::unique_ptr<Trainer> make_trainer(const TrainerOptions& options);

}  // namespace rlx
