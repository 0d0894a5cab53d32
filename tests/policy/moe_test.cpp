#include "tests/torch_catch.hpp"

#include "policy/moe_layer.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/sampling.hpp"
#include "policy/weights_io.hpp"
#include "messages/codec.hpp"

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
  auto& router = *moe->named_modules()["router"]->as<LinearMap>();
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
  auto& router = *moe->named_modules()["router"]->as<LinearMap>();
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

TEST_CASE("an explorer's parameters view the weight set's message, which they keep alive until released, and never "
          "write into it",
          "[policy][weights][zero_copy]") {
  torch::manual_seed(1);
  MoEMlpPolicy a(PolicyOptions{4, 2, 16, 4, 2});
  torch::manual_seed(2);
  MoEMlpPolicy b(PolicyOptions{4, 2, 16, 4, 2});
  const auto input = torch::randn({8, 4});
  const auto expected = a->forward(input).logits;
  std::weak_ptr<const void> message;
  const float* first = nullptr;
  {
    const WireBuffer m = encode(export_weights(*a, 7, "moe_mlp"), "t");
    auto w = decode<WeightSetData>(m);
    REQUIRE(w.ok());
    REQUIRE(w->tensors.front().values.is_view());
    message = w->tensors.front().values.keeper();
    first = std::as_const(*w).tensors.front().values.data();  // const: a non-const data() would copy
    REQUIRE(view_weights(*b, *w).ok());
    // The first parameter reads the message's floats where they lie.
    CHECK(b->named_parameters(true)[0].value().data_ptr<float>() == first);
  }
  // The set and its message are gone here but for the parameters' hold.
  CHECK_FALSE(message.expired());
  CHECK(torch::equal(b->forward(input).logits, expected));
  CHECK(weights_checksum(*b) == weights_checksum(*a));

  // The next version takes the parameters off the first message, which goes.
  torch::manual_seed(3);
  MoEMlpPolicy c(PolicyOptions{4, 2, 16, 4, 2});
  {
    const WireBuffer m = encode(export_weights(*c, 8, "moe_mlp"), "t");
    auto w = decode<WeightSetData>(m);
    REQUIRE(w.ok());
    REQUIRE(view_weights(*b, *w).ok());
  }
  CHECK(message.expired());
  CHECK(weights_checksum(*b) == weights_checksum(*c));

  // Released, the parameters hold nothing of a set: its message goes; the
  // shapes stay, and the next set views in as before.
  {
    const WireBuffer m = encode(export_weights(*c, 8, "moe_mlp"), "t");
    auto w = decode<WeightSetData>(m);
    REQUIRE(w.ok());
    REQUIRE(view_weights(*b, *w).ok());
    message = w->tensors.front().values.keeper();
  }
  REQUIRE_FALSE(message.expired());
  release_weights(*b);
  CHECK(message.expired());
  for (const auto& p : b->named_parameters(true)) CHECK(p.value().storage().nbytes() <= 4);

  // A set whose values are vectors of its own: the parameters get their
  // own copy (the set may go), not a view of memory that is not kept.
  {
    auto owned = export_weights(*a, 9, "moe_mlp");
    REQUIRE_FALSE(owned.tensors.front().values.is_view());
    REQUIRE(view_weights(*b, owned).ok());
    CHECK(b->named_parameters(true)[0].value().data_ptr<float>() != std::as_const(owned).tensors.front().values.data());
  }
  CHECK(torch::equal(b->forward(input).logits, expected));

  // A set that does not fit changes nothing.
  MoEMlpPolicy d(PolicyOptions{4, 2, 8, 4, 2});
  const auto before = weights_checksum(*d);
  auto r = view_weights(*d, export_weights(*a, 10, "moe_mlp"));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::invalid_field);
  CHECK(weights_checksum(*d) == before);
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
