#include "policy/moe_layer.hpp"

#include <cmath>
#include <tuple>

#include "core/error.hpp"
#include "policy/low_precision.hpp"

namespace rlx {

std::unique_lock<std::mutex> seeded_init(std::uint64_t seed) {
  static std::mutex mu;
  std::unique_lock<std::mutex> lock(mu);
  torch::manual_seed(seed);
  return lock;
}

MoELayerImpl::MoELayerImpl(const MoEOptions& o) : options_(o) {
  RLX_REQUIRE(o.top_k >= 1 && o.top_k <= o.experts, o.top_k, o.experts);
  RLX_REQUIRE(o.shared_hidden == 0 || o.swiglu, o.shared_hidden);
  const double s1 = 1.0 / std::sqrt(static_cast<double>(o.in));
  const double s2 = 1.0 / std::sqrt(static_cast<double>(o.hidden));
  // The router first, then the experts, then adapters: a seed's draws in
  // the order of the layouts' first versions.
  router_map_ = register_module("router", LinearMap(o.in, o.experts, !o.swiglu, true, Adapter{0, 0, o.router_frozen}));
  const auto drawn = [&](torch::Tensor t, double s) { return o.draw ? t.uniform_(-s, s) : t; };
  const auto hold = [&](const char* name, torch::Tensor t) {
    return o.experts_adapter.frozen ? register_buffer(name, std::move(t)) : register_parameter(name, std::move(t));
  };
  const auto r = o.experts_adapter.rank;  // adapters: A as PEFT draws it, B zero
  const auto a = [&](const char* name, std::int64_t in, double s) {
    torch::NoGradGuard guard;
    return register_parameter(name, torch::empty({o.experts, r, in}).uniform_(-s, s));
  };
  const auto b = [&](const char* name, std::int64_t out) {
    return register_parameter(name, torch::zeros({o.experts, out, r}));
  };
  if (!o.swiglu) {  // RLX's own: w1 and w2 adapted as up and down
    w1_ = hold("w1", drawn(torch::empty({o.experts, o.in, o.hidden}), s1));
    b1_ = hold("b1", torch::zeros({o.experts, o.hidden}));
    w2_ = hold("w2", drawn(torch::empty({o.experts, o.hidden, o.out}), s2));
    b2_ = hold("b2", torch::zeros({o.experts, o.out}));
    if (r > 0) {
      a_up_ = a("lora_A_up", o.in, s1), b_up_ = b("lora_B_up", o.hidden);
      a_down_ = a("lora_A_down", o.hidden, s2), b_down_ = b("lora_B_down", o.out);
    }
    return;
  }
  w_gate_ = hold("w_gate", drawn(torch::empty({o.experts, o.in, o.hidden}), s1));
  w_up_ = hold("w_up", drawn(torch::empty({o.experts, o.in, o.hidden}), s1));
  w_down_ = hold("w_down", drawn(torch::empty({o.experts, o.hidden, o.out}), s2));
  if (o.shared_hidden > 0) {
    const double s3 = 1.0 / std::sqrt(static_cast<double>(o.shared_hidden));
    s_gate_ = hold("s_gate", drawn(torch::empty({o.in, o.shared_hidden}), s1));
    s_up_ = hold("s_up", drawn(torch::empty({o.in, o.shared_hidden}), s1));
    s_down_ = hold("s_down", drawn(torch::empty({o.shared_hidden, o.out}), s3));
    s_weight_ = hold("s_weight", drawn(torch::empty({o.in}), s1));
  }
  if (r > 0) {
    a_gate_ = a("lora_A_gate", o.in, s1), b_gate_ = b("lora_B_gate", o.hidden);
    a_up_ = a("lora_A_up", o.in, s1), b_up_ = b("lora_B_up", o.hidden);
    a_down_ = a("lora_A_down", o.hidden, s2), b_down_ = b("lora_B_down", o.out);
  }
}

torch::Tensor MoELayerImpl::router_logits(const torch::Tensor& x) { return router_map_->forward(x); }

torch::Tensor MoELayerImpl::project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& a,
                                    const torch::Tensor& b, std::int64_t e) const {
  return adapted(x, torch::matmul(x, w[e]), a, b, e);
}

torch::Tensor MoELayerImpl::adapted(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& a,
                                    const torch::Tensor& b, std::int64_t e) const {
  if (!a.defined()) return y;
  return y + torch::matmul(torch::matmul(x, a[e].t()), b[e].t()) * options_.experts_adapter.scaling;
}

torch::Tensor MoELayerImpl::adapter_A(int which, std::int64_t e) const {
  return (which == 0 ? a_gate_ : which == 1 ? a_up_ : a_down_)[e];
}

torch::Tensor MoELayerImpl::adapter_B(int which, std::int64_t e) const {
  return (which == 0 ? b_gate_ : which == 1 ? b_up_ : b_down_)[e];
}

torch::Tensor MoELayerImpl::expert(std::int64_t e, const torch::Tensor& x) const {
  if (options_.swiglu) {
    auto h = torch::silu(project(x, w_gate_, a_gate_, b_gate_, e)) * project(x, w_up_, a_up_, b_up_, e);
    return project(h, w_down_, a_down_, b_down_, e);
  }
  auto pre = adapted(x, torch::addmm(b1_[e], x, w1_[e]), a_up_, b_up_, e);
  auto h = options_.gelu ? torch::gelu(pre) : torch::tanh(pre);
  return adapted(h, torch::addmm(b2_[e], h, w2_[e]), a_down_, b_down_, e);
}

torch::Tensor MoELayerImpl::shared(const torch::Tensor& x) const {
  auto h = torch::matmul(torch::silu(torch::matmul(x, s_gate_)) * torch::matmul(x, s_up_), s_down_);
  return torch::sigmoid(torch::matmul(x, s_weight_)).unsqueeze(-1) * h;
}

MoEOutput MoELayerImpl::forward(const torch::Tensor& x, const torch::Tensor& forced_routes) {
  const auto N = x.size(0);
  const auto E = options_.experts, k = options_.top_k;
  // The router's softmax, gates and losses in fp32 whatever x's dtype (as
  // the MoE families' own code); the gates meet the experts in x's.
  auto logits = wide(router_logits(x));  // [N, E]
  auto probs = torch::softmax(logits, -1);
  torch::Tensor top_p, top_i;                              // [N, k]
  if (forced_routes.defined()) {
    RLX_REQUIRE(forced_routes.size(0) == N && forced_routes.size(1) == k, forced_routes.size(0), N);
    top_i = forced_routes.to(torch::kLong);
    top_p = probs.gather(1, top_i);
  } else {
    std::tie(top_p, top_i) = probs.topk(k, -1);
  }
  auto gates = (options_.renormalise ? top_p / top_p.sum(-1, true) : top_p).to(x.scalar_type());

  // Group (token, slot) pairs by expert.
  auto flat_expert = top_i.reshape({-1});                  // [N*k]
  auto order = flat_expert.argsort();
  auto counts = torch::bincount(flat_expert, {}, E);       // [E]
  auto token_of = torch::arange(N, x.options().dtype(torch::kLong)).repeat_interleave(k).index_select(0, order);
  auto gate_of = gates.reshape({-1}).index_select(0, order);
  auto counts_cpu = counts.to(torch::kCPU);
  const auto* c = counts_cpu.data_ptr<std::int64_t>();

  // Capacity: each expert keeps its first `cap` pairs in token order
  // (earlier tokens first, as Switch does).
  std::int64_t cap = N * k;
  if (options_.capacity_factor > 0)
    cap = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(options_.capacity_factor * N * k / E)));
  auto y = torch::zeros({N, options_.out}, x.options());
  std::int64_t start = 0, dropped = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    const auto n = c[e];
    if (n == 0) continue;
    auto tokens = token_of.narrow(0, start, n);
    auto gate = gate_of.narrow(0, start, n);
    start += n;
    if (n > cap) {
      auto [kept, pos] = tokens.sort();
      tokens = kept.narrow(0, 0, cap);
      gate = gate.index_select(0, pos.narrow(0, 0, cap));
      dropped += n - cap;
    }
    auto ye = expert(e, x.index_select(0, tokens)) * gate.unsqueeze(1);
    y = y.index_add(0, tokens, ye);
  }

  if (s_gate_.defined()) y = y + shared(x);
  MoEOutput out;
  out.dropped_fraction = N == 0 ? 0.0 : static_cast<double>(dropped) / static_cast<double>(N * k);
  out.y = y;
  auto fraction = counts.to(torch::kFloat32) / static_cast<double>(N * k);   // f_e
  out.load_balance = static_cast<double>(E) * (fraction.detach() * probs.mean(0)).sum();
  out.router_z = torch::logsumexp(logits, -1).pow(2).mean();
  out.expert_fraction = fraction.detach();
  out.routes = top_i;
  return out;
}

torch::Tensor MoELayerImpl::forward_reference(const torch::Tensor& x) {
  auto probs = torch::softmax(wide(router_logits(x)), -1);
  auto [top_p, top_i] = probs.topk(options_.top_k, -1);
  auto gates = (options_.renormalise ? top_p / top_p.sum(-1, true) : top_p).to(x.scalar_type());
  std::vector<torch::Tensor> rows;
  for (std::int64_t t = 0; t < x.size(0); ++t) {
    auto acc = torch::zeros({options_.out}, x.options());
    for (std::int64_t s = 0; s < options_.top_k; ++s) {
      auto e = top_i[t][s].item<std::int64_t>();
      acc = acc + gates[t][s] * expert(e, x[t].unsqueeze(0)).squeeze(0);
    }
    rows.push_back(acc);
  }
  auto y = torch::stack(rows);
  return s_gate_.defined() ? y + shared(x) : y;
}

}  // namespace rlx
