// What every trainer does the same way with its model: the Adam step
// (gradients reduced over the data-parallel ranks, clipped, then the
// step), saving and loading parameters with the optimizer's moments, and
// statistics summed over the ranks (advantage normalisation). The MLP
// trainer (learner/mlp_trainer.hpp) and the token trainer
// (learner/token_trainer.hpp) both train through one. CAF-free.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/error.hpp"

namespace rlx {

class LearnerGroup;

struct ModelOptimizerOptions {
  double lr = 3e-4;
  // Adam's epsilon. Each trainer keeps the one it has always trained with
  // (the MLP policy 1e-5, the token policy 1e-6), so that checkpoints and
  // rollout logs written before still continue and replay bit-identically.
  double eps = 1e-5;
  double max_grad_norm = 0;  // clip the global gradient norm to this (0: no clipping)
  // How the ranks' gradients are combined before the step: averaged (each
  // rank's loss a mean over its own rows) or summed (each rank's loss is
  // its share of the whole batch's).
  enum class Reduction { average, sum } reduction = Reduction::average;
  LearnerGroup* group = nullptr;  // the data-parallel ranks, or null when alone; not owned
};

class ModelOptimizer {
 public:
  // REQUIRES: `model` already on the device it trains on.
  ModelOptimizer(std::shared_ptr<torch::nn::Module> model, const ModelOptimizerOptions& options);

  void zero_grad() { adam_->zero_grad(); }
  void set_lr(double lr);
  // Reduces the gradients over the ranks, clips them, steps Adam.
  void step();

  // "param/<name>" for each parameter (on the CPU) and "optimizer".
  void save(torch::serialize::OutputArchive& archive) const;
  // The same back, from an archive read onto the model's device. Every
  // parameter is read and its shape checked before any is changed: a
  // missing or misshapen parameter leaves the model as it was.
  Result<void> load(torch::serialize::InputArchive& archive);

 private:
  std::shared_ptr<torch::nn::Module> model_;
  ModelOptimizerOptions options_;
  std::unique_ptr<torch::optim::Adam> adam_;
};

// The parameters ModelOptimizer::save wrote, one for each of `model`'s
// (in named_parameters order), each checked for its shape; nothing is
// copied into the model. With `absent`, a parameter the archive lacks is
// named there and left undefined instead of refusing the archive.
Result<std::vector<torch::Tensor>> read_saved_parameters(torch::serialize::InputArchive& archive,
                                                         const torch::nn::Module& model,
                                                         std::vector<std::string>* absent = nullptr);

// `values` summed over the ranks (as they are when alone, or for null).
std::vector<double> sum_over_ranks(std::vector<double> values, LearnerGroup* group);

// The mean and the unbiased standard deviation of values spread over the
// ranks, from each rank's sum, sum of squares and count (summed over the
// ranks in float64). With one value or none: the mean (0 for none) and 1.
struct MeanStd {
  double mean = 0, std = 1;
};
MeanStd mean_std_over_ranks(double sum, double squares, double count, LearnerGroup* group);

}  // namespace rlx
