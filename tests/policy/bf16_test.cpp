// bf16 at rest ([policy] dtype = "bf16"): a policy held in bf16 computes
// in bf16 and gives its fp32 self's log-probabilities within bf16's
// rounding, in one pass and through the KV cache, for RLX's layout and
// the Hugging Face families; a weight set of bf16 tensors is half the
// bytes, checked as an fp32 one is, and viewed by a bf16 policy without a
// copy; a bf16 checkpoint fills a bf16 policy with its own bytes.
#include "tests/torch_catch.hpp"

#include <cstring>
#include <filesystem>

#include "messages/codec.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/weights_io.hpp"
#include "policy/weights_wire.hpp"
#include "tests/helpers.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

TransformerOptions in_bf16(TransformerOptions o) {
  o.dtype = WeightDType::bf16;
  return o;
}

// Left-padded rows of `width` tokens drawn from `seed`, the first row full.
std::pair<torch::Tensor, torch::Tensor> random_rows(std::int64_t vocab, std::int64_t width, std::uint64_t seed) {
  torch::manual_seed(seed);
  auto tokens = torch::randint(vocab, {3, width}, torch::kLong);
  auto valid = torch::ones({3, width}, torch::kBool);
  valid[1].narrow(0, 0, 4).fill_(false);
  valid[2].narrow(0, 0, 9).fill_(false);
  return {tokens, valid};
}

// Over the real tokens, of the largest |log p_a - log p_b| over the
// vocabulary: the mean and the largest.
std::pair<double, double> log_prob_gaps(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& valid) {
  auto d = (torch::log_softmax(a, -1) - torch::log_softmax(b, -1)).abs().amax(-1).masked_select(valid);
  return {d.mean().item<double>(), d.max().item<double>()};
}

}  // namespace

TEST_CASE("a policy held in bf16 gives its fp32 self's log-probabilities within bf16's rounding, through the cache too",
          "[policy][bf16]") {
  struct Case {
    const char* name;
    TransformerOptions o;
  };
  for (const auto& [name, o] :
       {Case{"rlx", test::small_transformer(48, 40)}, Case{"qwen3_moe", test::hf_small(HfFamily::qwen3_moe)},
        Case{"qwen2_moe", test::hf_small(HfFamily::qwen2_moe)}, Case{"llama", test::hf_small(HfFamily::llama)}}) {
    INFO(name);
    auto f32 = make_seeded_transformer(o, 5);
    auto bf16 = make_seeded_transformer(in_bf16(o), 5);  // the same draws, rounded
    for (const auto& p : bf16->parameters()) REQUIRE(p.scalar_type() == torch::kBFloat16);
    const auto [tokens, valid] = random_rows(o.vocab, 40, 9);  // positions far enough for a bf16 angle to go wrong
    torch::NoGradGuard guard;
    auto wide = f32->forward(tokens, valid);
    auto narrow = bf16->forward(tokens, valid);
    CHECK(narrow.logits.scalar_type() == torch::kFloat32);
    CHECK(narrow.values.scalar_type() == torch::kFloat32);
    const auto [mean, worst] = log_prob_gaps(narrow.logits, wide.logits, valid);
    const double flipped = route_mismatch(narrow.routes, wide.routes, valid);
    INFO("log-prob gap mean " << mean << ", largest " << worst << "; routes flipped " << flipped);
    CHECK(mean > 0);     // it did compute in bf16
    CHECK(mean < 0.04);  // bf16 keeps 8 bits; a rare token whose route flipped differs more
    // Decoding through the cache in bf16: the one-pass forward's log-probabilities.
    auto cache = bf16->new_cache(3, 48);
    CHECK(cache.k[0].scalar_type() == torch::kBFloat16);
    std::vector<torch::Tensor> steps;
    steps.push_back(bf16->step(tokens.narrow(1, 0, 30), valid.narrow(1, 0, 30), cache).logits);
    for (std::int64_t c = 30; c < 40; ++c)
      steps.push_back(bf16->step(tokens.narrow(1, c, 1), valid.narrow(1, c, 1), cache).logits);
    const auto [cached_mean, cached_worst] = log_prob_gaps(torch::cat(steps, 1), narrow.logits, valid);
    INFO("cache vs one pass: mean " << cached_mean << ", largest " << cached_worst);
    CHECK(cached_mean < 0.04);
  }
}

TEST_CASE("a bf16 weight set is half the bytes, checked as an fp32 one, and a bf16 policy views it without a copy",
          "[policy][bf16][weights]") {
  const auto o = test::hf_small(HfFamily::qwen3_moe);
  auto master = make_trainable_transformer(in_bf16(o), 3, false);  // fp32 parameters, as a learner holds them
  for (const auto& p : master->parameters()) REQUIRE(p.scalar_type() == torch::kFloat32);
  const auto wide = encode_module_weights(*master, 4, "moe_transformer", 1, "learner");
  const auto narrow = encode_module_weights(*master, 4, "moe_transformer", 1, "learner", WeightDType::bf16);
  CHECK(narrow.parameters == wide.parameters);
  const double ratio = static_cast<double>(narrow.buf.size()) / static_cast<double>(wide.buf.size());
  INFO("bf16 / fp32 bytes " << ratio);
  CHECK(ratio < 0.52);
  CHECK(ratio > 0.48);
  // Each tensor is the master rounded to the nearest bf16, as Tensor::to rounds.
  auto set = decode<WeightSetData>(WireBuffer::copy_of(narrow.buf.bytes().data(), narrow.buf.size()));
  REQUIRE(set.ok());
  const auto params = master->named_parameters(true);
  REQUIRE(set->tensors.size() == params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& t = set->tensors[i];
    REQUIRE(t.dtype == WeightDType::bf16);
    auto rounded = params[i].value().detach().to(torch::kBFloat16).contiguous();
    CHECK(std::memcmp(t.bytes(), rounded.data_ptr(), t.byte_size()) == 0);
  }
  CHECK(export_weights(*master, 4, "moe_transformer", WeightDType::bf16).checksum == set->checksum);
  // A bf16 policy's parameters are views of the message; its logits are those of the rounded masters.
  auto explorer = make_unfilled_transformer(in_bf16(o), 0);
  REQUIRE(view_weights(*explorer, *set).ok());
  const auto* first = static_cast<const std::byte*>(set->tensors.front().bytes());
  CHECK(explorer->named_parameters(true)[0].value().data_ptr() == first);
  auto copy = make_unfilled_transformer(in_bf16(o), 0);
  REQUIRE(import_weights(*copy, *set).ok());
  const auto [tokens, valid] = random_rows(o.vocab, 12, 2);
  torch::NoGradGuard guard;
  CHECK(torch::equal(explorer->forward(tokens, valid).logits, copy->forward(tokens, valid).logits));
  // An fp32 policy takes a bf16 set too (widened, exactly).
  auto widened = make_unfilled_transformer(o, 0);
  REQUIRE(import_weights(*widened, *set).ok());
  CHECK(torch::equal(widened->named_parameters(true)[0].value(),
                     params[0].value().detach().to(torch::kBFloat16).to(torch::kFloat32)));
  SECTION("a flipped bit in a bf16 tensor fails the checksum") {
    auto bytes = std::vector<std::byte>(narrow.buf.bytes().begin(), narrow.buf.bytes().end());
    bytes[bytes.size() / 2] ^= std::byte{0x10};
    auto bad = WireBuffer::copy_of(bytes.data(), bytes.size());
    CHECK_FALSE(check_weight_set(bad).ok());
  }
}

TEST_CASE("a bf16 Hugging Face checkpoint fills a bf16 policy with its own bytes", "[policy][bf16][hf]") {
  const test::TempDir tmp("bf16_hf");
  const auto dir = tmp.path;
  const auto o = test::hf_small(HfFamily::qwen3_moe);
  auto source = make_seeded_transformer(o, 7);
  REQUIRE(export_hf(source, dir.string(), StDtype::bf16).ok());
  auto checkpoint = SafetensorsCheckpoint::open(dir.string());
  REQUIRE(checkpoint.ok());
  auto bf16 = make_unfilled_transformer(in_bf16(o), 1);
  REQUIRE(load_hf_weights(bf16, *checkpoint).ok());
  auto f32 = make_unfilled_transformer(o, 1);
  REQUIRE(load_hf_weights(f32, *checkpoint).ok());
  const auto narrow = bf16->hf_tensors(), wide = f32->hf_tensors();
  REQUIRE(narrow.size() == wide.size());
  for (std::size_t i = 0; i < narrow.size(); ++i) {
    INFO(narrow[i].first);
    CHECK(narrow[i].second.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(narrow[i].second.to(torch::kFloat32), wide[i].second));  // bf16 widens exactly
  }
}
