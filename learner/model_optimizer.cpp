#include "learner/model_optimizer.hpp"

#include <cmath>
#include <cstring>

#include "learner/learner_group.hpp"
#include "learner/lr_schedule.hpp"

namespace rlx {

ModelOptimizer::ModelOptimizer(std::shared_ptr<torch::nn::Module> model, const ModelOptimizerOptions& options)
    : model_(std::move(model)), options_(options) {
  adam_ = std::make_unique<torch::optim::Adam>(model_->parameters(),
                                               torch::optim::AdamOptions(options.lr).eps(options.eps));
}

void ModelOptimizer::set_lr(double lr) { rlx::set_lr(*adam_, lr); }

void ModelOptimizer::step() {
  const auto parameters = model_->parameters();
  if (options_.group) {
    if (options_.reduction == ModelOptimizerOptions::Reduction::average)
      options_.group->average_gradients(parameters);
    else
      options_.group->sum_gradients(parameters);
  }
  if (options_.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, options_.max_grad_norm);
  adam_->step();
}

void ModelOptimizer::save(torch::serialize::OutputArchive& a) const {
  for (const auto& p : model_->named_parameters(true)) a.write("param/" + p.key(), p.value().detach().cpu());
  torch::serialize::OutputArchive opt;
  adam_->save(opt);
  a.write("optimizer", opt);
}

namespace {

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (auto d : t.sizes()) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

}  // namespace

Result<std::vector<torch::Tensor>> read_saved_parameters(torch::serialize::InputArchive& a,
                                                         const torch::nn::Module& model,
                                                         std::vector<std::string>* absent) {
  try {
    const auto params = model.named_parameters(true);
    std::vector<torch::Tensor> read(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      if (absent && !a.try_read("param/" + p.key(), read[i])) {
        absent->push_back(p.key());
        continue;
      }
      if (!absent) a.read("param/" + p.key(), read[i]);
      if (read[i].sizes() != p.value().sizes())
        return make_error(Errc::invalid_field, "checkpoint parameter " + p.key() + " is " + shape_of(read[i]) +
                                                   ", this policy's " + shape_of(p.value()));
    }
    return read;
  } catch (const c10::Error& e) {
    return make_error(Errc::invalid_field, std::string("checkpoint: ") + e.what_without_backtrace());
  }
}

Result<void> ModelOptimizer::load(torch::serialize::InputArchive& a) {
  auto read = read_saved_parameters(a, *model_);
  if (!read) return read.error();
  try {
    torch::serialize::InputArchive opt;
    a.read("optimizer", opt);
    torch::NoGradGuard guard;
    auto params = model_->named_parameters(true);
    for (std::size_t i = 0; i < params.size(); ++i) params[i].value().copy_((*read)[i]);
    adam_->load(opt);
    return {};
  } catch (const c10::Error& e) {
    return make_error(Errc::invalid_field, std::string("checkpoint: ") + e.what_without_backtrace());
  }
}

std::vector<double> sum_over_ranks(std::vector<double> values, LearnerGroup* group) {
  if (!group || group->world() == 1) return values;
  auto t = torch::tensor(values, torch::kFloat64);
  group->sum(t);
  std::memcpy(values.data(), t.data_ptr<double>(), values.size() * sizeof(double));
  return values;
}

MeanStd mean_std_over_ranks(double sum, double squares, double count, LearnerGroup* group) {
  const auto m = sum_over_ranks({sum, squares, count}, group);
  const double n = m[2];
  MeanStd r;
  if (n > 0) r.mean = m[0] / n;
  if (n > 1) r.std = std::sqrt(std::max(0.0, (m[1] - n * r.mean * r.mean) / (n - 1)));
  return r;
}

}  // namespace rlx
