#include "tests/torch_catch.hpp"

#include "policy/moe_layer.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/sampling.hpp"
#include "policy/weights_io.hpp"

using namespace rlx;

TEST_CASE("the grouped MoE layer matches the per-token reference", "[policy][moe]") {
  torch::manual_seed(3);
  MoELayer moe(MoEOptions{8, 16, 8, 4, 2});
  auto x = torch::randn({33, 8});
  auto out = moe->forward(x);
  CHECK(torch::allclose(out.y, moe->forward_reference(x), 1e-5, 1e-5));
  CHECK((out.routes.sizes() == std::vector<std::int64_t>{33, 2}));
  CHECK(out.expert_fraction.sum().item<float>() == Approx(1.0f));
}

TEST_CASE("top-1 routing sends each token to exactly one expert", "[policy][moe]") {
  torch::manual_seed(4);
  MoELayer moe(MoEOptions{4, 8, 4, 3, 1});
  auto x = torch::randn({10, 4});
  CHECK(torch::allclose(moe->forward(x).y, moe->forward_reference(x), 1e-5, 1e-5));
}

TEST_CASE("the load-balancing loss is 1 when balanced and grows with imbalance", "[policy][moe]") {
  MoELayer moe(MoEOptions{4, 8, 4, 4, 1});
  auto x = torch::randn({64, 4});
  auto& router = *moe->named_modules()["router"]->as<torch::nn::Linear>();
  {
    torch::NoGradGuard g;
    router.weight.zero_();
    router.bias.copy_(torch::tensor({10.0f, 0.0f, 0.0f, 0.0f}));  // everything to expert 0
  }
  auto skewed = moe->forward(x);
  CHECK(skewed.expert_fraction[0].item<float>() == Approx(1.0f));
  CHECK(skewed.load_balance.item<float>() > 3.9f);  // E * 1 * ~1
  {
    torch::NoGradGuard g;
    router.weight.normal_(0, 3.0);
    router.bias.zero_();
  }
  auto spread = moe->forward(torch::randn({4096, 4}));
  CHECK(spread.load_balance.item<float>() < skewed.load_balance.item<float>());
  CHECK(spread.load_balance.item<float>() < 2.0f);
}

TEST_CASE("the load-balancing loss has a gradient into the router", "[policy][moe]") {
  MoELayer moe(MoEOptions{4, 8, 4, 4, 2});
  auto out = moe->forward(torch::randn({32, 4}));
  out.load_balance.backward();
  auto& router = *moe->named_modules()["router"]->as<torch::nn::Linear>();
  CHECK(router.weight.grad().abs().sum().item<float>() > 0);
}

TEST_CASE("the MoE MLP policy gives logits, values and expert utilisation", "[policy][moe]") {
  MoEMlpPolicy p(PolicyOptions{4, 2, 32, 4, 2});
  auto out = p->forward(torch::randn({16, 4}));
  CHECK((out.logits.sizes() == std::vector<std::int64_t>{16, 2}));
  CHECK((out.value.sizes() == std::vector<std::int64_t>{16}));
  CHECK(out.expert_fraction.numel() == 4);
}

TEST_CASE("weights export and import round-trip and reject a mismatch", "[policy][weights]") {
  torch::manual_seed(1);
  MoEMlpPolicy a(PolicyOptions{4, 2, 16, 4, 2});
  torch::manual_seed(2);
  MoEMlpPolicy b(PolicyOptions{4, 2, 16, 4, 2});
  CHECK(weights_checksum(*a) != weights_checksum(*b));
  auto w = export_weights(*a, 7, "moe_mlp");
  CHECK(w.checksum == w.compute_checksum());
  REQUIRE(import_weights(*b, w).ok());
  CHECK(weights_checksum(*a) == weights_checksum(*b));
  MoEMlpPolicy c(PolicyOptions{4, 2, 8, 4, 2});
  auto before = weights_checksum(*c);
  auto r = import_weights(*c, w);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::invalid_field);
  CHECK(weights_checksum(*c) == before);
}

TEST_CASE("sampling follows the policy's probabilities", "[policy][sampling]") {
  std::mt19937_64 rng(5);
  auto logits = torch::log(torch::tensor({{0.2f, 0.8f}})).repeat({10000, 1});
  auto s = sample_categorical(logits, rng);
  double ones = 0;
  for (auto a : s.actions) ones += static_cast<double>(a);
  CHECK(ones / 10000.0 == Approx(0.8).margin(0.02));
  CHECK(s.log_probs[0] == Approx(s.actions[0] ? std::log(0.8) : std::log(0.2)).margin(1e-5));
  auto g = sample_categorical(logits.narrow(0, 0, 3), rng, true);
  CHECK((g.actions == std::vector<std::int64_t>{1, 1, 1}));
}
