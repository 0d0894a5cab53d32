// The token policy's trainer behind the Trainer interface: turns admitted
// token segments into a TokenBatch (the sampled rows, their rewards and,
// with hint_coef > 0, the hinted teacher prompts) and trains it with
// token-level GRPO or PPO (learner/token_trainer.hpp). Single-threaded;
// CAF-free.
#pragma once

#include <memory>

#include "envs/tokens/tokenizer.hpp"
#include "learner/token_trainer.hpp"
#include "learner/trainer.hpp"

namespace rlx {

// The TokenTrainer settings that `options` (the run's configuration) asks for.
TokenTrainerOptions token_trainer_options(const TrainerOptions& options);

class TokenPolicyTrainer final : public Trainer {
 public:
  explicit TokenPolicyTrainer(const TokenTrainerOptions& options);

  std::string refuses(const Segment& segment) const override;
  WeightSetData weights() const override;
  EncodedWeightSet encoded_weights(std::uint64_t created_unix_ns) const override;

  // The token RL compute itself (supervised steps, model files).
  TokenTrainer& tokens() { return tokens_; }

 private:
  UpdateStats train(const std::vector<const Segment*>& segments) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  Result<void> load(torch::serialize::InputArchive& archive) override;

  TokenTrainer tokens_;
  std::shared_ptr<const Tokenizer> tokenizer_;  // what hints are encoded with
};

}  // namespace rlx
