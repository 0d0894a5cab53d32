#include "policy/moe_layer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace rlx {

MoELayerImpl::MoELayerImpl(const MoEOptions& o) : options_(o) {
  RLX_REQUIRE(o.top_k >= 1 && o.top_k <= o.experts, o.top_k, o.experts);
  router_ = register_module("router", torch::nn::Linear(o.in, o.experts));
  const double s1 = 1.0 / std::sqrt(static_cast<double>(o.in));
  const double s2 = 1.0 / std::sqrt(static_cast<double>(o.hidden));
  w1_ = register_parameter("w1", torch::empty({o.experts, o.in, o.hidden}).uniform_(-s1, s1));
  b1_ = register_parameter("b1", torch::zeros({o.experts, o.hidden}));
  w2_ = register_parameter("w2", torch::empty({o.experts, o.hidden, o.out}).uniform_(-s2, s2));
  b2_ = register_parameter("b2", torch::zeros({o.experts, o.out}));
}

MoEOutput MoELayerImpl::forward(const torch::Tensor& x) {
  const auto N = x.size(0);
  const auto E = options_.experts, k = options_.top_k;
  auto logits = router_->forward(x);                       // [N, E]
  auto probs = torch::softmax(logits, -1);
  auto [top_p, top_i] = probs.topk(k, -1);                 // [N, k]
  auto gates = top_p / top_p.sum(-1, true);

  // Group (token, slot) pairs by expert.
  auto flat_expert = top_i.reshape({-1});                  // [N*k]
  auto order = flat_expert.argsort();
  auto counts = torch::bincount(flat_expert, {}, E);       // [E]
  auto token_of = torch::arange(N, x.options().dtype(torch::kLong)).repeat_interleave(k).index_select(0, order);
  auto gate_of = gates.reshape({-1}).index_select(0, order);
  auto counts_cpu = counts.to(torch::kCPU);
  const auto* c = counts_cpu.data_ptr<std::int64_t>();

  auto y = torch::zeros({N, options_.out}, x.options());
  std::int64_t start = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    const auto n = c[e];
    if (n == 0) continue;
    auto tokens = token_of.narrow(0, start, n);
    auto h = torch::tanh(torch::addmm(b1_[e], x.index_select(0, tokens), w1_[e]));
    auto ye = torch::addmm(b2_[e], h, w2_[e]) * gate_of.narrow(0, start, n).unsqueeze(1);
    y = y.index_add(0, tokens, ye);
    start += n;
  }

  MoEOutput out;
  out.y = y;
  auto fraction = counts.to(x.dtype()) / static_cast<double>(N * k);   // f_e
  out.load_balance = static_cast<double>(E) * (fraction.detach() * probs.mean(0)).sum();
  out.router_z = torch::logsumexp(logits, -1).pow(2).mean();
  out.expert_fraction = fraction.detach();
  out.routes = top_i;
  return out;
}

torch::Tensor MoELayerImpl::forward_reference(const torch::Tensor& x) {
  auto probs = torch::softmax(router_->forward(x), -1);
  auto [top_p, top_i] = probs.topk(options_.top_k, -1);
  auto gates = top_p / top_p.sum(-1, true);
  std::vector<torch::Tensor> rows;
  for (std::int64_t t = 0; t < x.size(0); ++t) {
    auto acc = torch::zeros({options_.out}, x.options());
    for (std::int64_t s = 0; s < options_.top_k; ++s) {
      auto e = top_i[t][s].item<std::int64_t>();
      auto h = torch::tanh(torch::matmul(x[t], w1_[e]) + b1_[e]);
      acc = acc + gates[t][s] * (torch::matmul(h, w2_[e]) + b2_[e]);
    }
    rows.push_back(acc);
  }
  return torch::stack(rows);
}

}  // namespace rlx
