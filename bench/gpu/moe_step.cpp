#include "bench/gpu/moe_step.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <torch/cuda.h>

#include "bench/timing.hpp"
#include "policy/weights_io.hpp"
#if RLX_GPU_WIRE
#include "policy/weights_wire.hpp"
#endif

namespace rlx {

namespace {

// Kernels on a GPU run asynchronously: a timer reads them only after this.
void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

torch::Device checked_device(const std::string& name) {
  const torch::Device device(name);
  TORCH_CHECK(!device.is_cuda() || torch::cuda::is_available(), "device \"", name,
              "\": this LibTorch has no CUDA or no GPU is visible");
  TORCH_CHECK(!device.is_cuda() || device.index() < static_cast<int>(torch::cuda::device_count()), "device \"", name,
              "\": only ", torch::cuda::device_count(), " GPU(s) visible");
  return device;
}

// TFLOP/s of an n x n x n product in `dtype` on `device` (mean of 10
// after 3 not timed): what this device does with the easiest matrix work.
double matmul_tflops(const torch::Device& device, torch::ScalarType dtype, std::int64_t n) {
  auto opts = torch::TensorOptions().device(device).dtype(dtype);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  torch::NoGradGuard guard;
  for (int i = 0; i < 3; ++i) torch::matmul(a, b);
  sync(device);
  const int reps = 10;
  const auto t = Clock::now();
  for (int i = 0; i < reps; ++i) torch::matmul(a, b);
  sync(device);
  return 2.0 * static_cast<double>(n) * n * n * reps / seconds_since(t) / 1e12;
}

}  // namespace

double training_flops_per_token(const TransformerOptions& m, std::int64_t seq) {
  const double d = static_cast<double>(m.d_model), h = static_cast<double>(m.expert_hidden);
  const double per_layer = 4 * d * d                                   // qkv and the output projection
                           + d * static_cast<double>(m.experts)        // router
                           + 2 * static_cast<double>(m.top_k) * d * h; // the experts a token is routed to
  const double weights = static_cast<double>(m.layers) * per_layer + d * static_cast<double>(m.vocab + 1);
  const double attention = 4 * static_cast<double>(m.layers) * static_cast<double>(seq) * d;
  return 3 * (2 * weights + attention);
}

StepBenchResult run_step_bench(const StepBenchOptions& o) {
  TORCH_CHECK(o.seq >= 2 && o.seq <= o.model.max_len, "seq must be in [2, max_len]");
  const auto device = checked_device(o.device);
  StepBenchResult r;
  r.matmul_tflops = matmul_tflops(device, o.dtype, o.matmul_n);

  auto model = make_seeded_transformer(o.model, o.seed);
  model->to(device, o.dtype);
  for (const auto& p : model->parameters()) r.parameters += p.numel();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-4));
  torch::manual_seed(o.seed);
  auto tokens = torch::randint(3, o.model.vocab, {o.batch, o.seq}, torch::kLong).to(device);
  auto valid = torch::ones({o.batch, o.seq}, torch::TensorOptions().dtype(torch::kBool).device(device));
  auto targets = tokens.narrow(1, 1, o.seq - 1).reshape({-1});

  auto forward = [&] {
    optimizer.zero_grad();
    auto out = model->forward(tokens, valid);
    auto logits = out.logits.narrow(1, 0, o.seq - 1).reshape({-1, o.model.vocab}).to(torch::kFloat32);
    return torch::nn::functional::cross_entropy(logits, targets) + 0.01 * out.load_balance.to(torch::kFloat32) +
           0.001 * out.router_z.to(torch::kFloat32);
  };
  auto step = [&] {
    auto loss = forward();
    loss.backward();
    optimizer.step();
    return loss.detach();
  };
  for (int i = 0; i < o.warmup; ++i) {
    auto loss = step();
    if (i == 0) r.first_loss = loss.item<double>();
  }
  sync(device);
  torch::Tensor last;
  const auto t = Clock::now();
  for (int i = 0; i < o.steps; ++i) last = step();
  sync(device);
  r.step_s = seconds_since(t) / std::max(1, o.steps);
  std::vector<double> fw, bw, opt;
  for (int i = 0; i < std::max(3, o.steps / 2); ++i) {
    auto t0 = Clock::now();
    auto loss = forward();
    sync(device);
    fw.push_back(seconds_since(t0));
    t0 = Clock::now();
    loss.backward();
    sync(device);
    bw.push_back(seconds_since(t0));
    t0 = Clock::now();
    optimizer.step();
    sync(device);
    opt.push_back(seconds_since(t0));
  }
  r.forward_s = median(fw);
  r.backward_s = median(bw);
  r.optimizer_s = median(opt);
  if (last.defined()) r.last_loss = last.item<double>();
  r.tokens_per_s = static_cast<double>(o.batch * o.seq) / r.step_s;
  r.flops_per_token = training_flops_per_token(o.model, o.seq);
  r.model_tflops = r.tokens_per_s * r.flops_per_token / 1e12;
  return r;
}

PublishBenchResult run_publish_bench(const TransformerOptions& m, const std::string& device_name,
                                     torch::ScalarType dtype, int rounds) {
  const auto device = checked_device(device_name);
  auto learner = make_seeded_transformer(m, 1);
  learner->to(device, dtype);
  auto explorer = make_seeded_transformer(m, 2);  // another policy until the weights arrive
  std::int64_t numel = 0;
  for (const auto& p : learner->parameters()) numel += p.numel();
  PublishBenchResult r;
  r.bytes = static_cast<double>(numel) * sizeof(float);
  auto flat = torch::ones({numel}, torch::TensorOptions().device(device).dtype(torch::kFloat32));
  auto host = torch::empty({numel}, torch::kFloat32);
  std::vector<double> exp, imp, raw, enc;
  for (int i = 0; i < rounds + 1; ++i) {  // the first round is a warm-up
    sync(device);
    auto t = Clock::now();
    auto w = export_weights(*learner, static_cast<std::uint64_t>(i + 1), "moe_transformer");
    const double e = seconds_since(t);
    t = Clock::now();
    const bool ok = import_weights(*explorer, w).ok();
    const double im = seconds_since(t);
    t = Clock::now();
    host.copy_(flat);
    sync(device);
    const double c = seconds_since(t);
    r.checksums_match = ok && weights_checksum(*explorer) == w.checksum;
#if RLX_GPU_WIRE
    sync(device);
    t = Clock::now();
    {
      const auto e = encode_module_weights(*learner, static_cast<std::uint64_t>(i + 1), "moe_transformer", 0, "learner");
      r.encoded_matches = check_weight_set(e.buf).ok() && e.checksum == w.checksum;
    }
    if (i > 0) enc.push_back(seconds_since(t));
#endif
    if (i > 0) exp.push_back(e), imp.push_back(im), raw.push_back(c);
  }
  r.export_s = median(exp);
  r.import_s = median(imp);
  r.raw_copy_s = median(raw);
  if (!enc.empty()) r.encode_s = median(enc);
  return r;
}

}  // namespace rlx
