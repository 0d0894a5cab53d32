// The MLP policy's trainer (policy/moe_mlp_policy.hpp): PPO with GAE and
// the decoupled off-policy correction, or V-trace actor-critic, over
// segments of vector observations. Adam with epsilon 1e-5; gradients
// averaged over the data-parallel ranks, advantages normalised over all
// of them (learner/model_optimizer.hpp). Single-threaded; CAF-free.
#pragma once

#include <memory>

#include "learner/trainer.hpp"

namespace rlx {

class MlpTrainer final : public Trainer {
 public:
  explicit MlpTrainer(const TrainerOptions& options);
  ~MlpTrainer() override;

  std::string refuses(const Segment& segment) const override;
  WeightSetData weights() const override;
  EncodedWeightSet encoded_weights(std::uint64_t created_unix_ns) const override;

 private:
  UpdateStats train(const std::vector<const Segment*>& segments) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  Result<void> load(torch::serialize::InputArchive& archive) override;

  struct Impl;  // LibTorch state, kept out of this header (compile time)
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
