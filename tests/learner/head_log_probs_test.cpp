// The learner's log-probabilities through the output layer a chunk of
// positions at a time (learner/head_log_probs.hpp): the same values and
// the same gradients, for every parameter, as the whole logits give, for
// RLX's layout (lm_head with a bias), a Hugging Face MoE with its own
// lm_head and a dense one with the tied embedding, under a temperature and
// a decoding rule's blocked tokens, in fp32 and in bf16 over fp32 masters.
#include "tests/torch_catch.hpp"

#include <map>
#include <string>

#include "learner/head_log_probs.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

struct Pass {
  torch::Tensor logp, entropy;
  std::map<std::string, torch::Tensor> grads;
};

// One pass and the gradient of a fixed weighting of its log-probabilities
// and entropies; chunked (3 positions a chunk) or from the whole logits.
Pass pass(MoETransformer& model, bool chunked, const torch::Tensor& tokens, const torch::Tensor& valid,
          const BlockedTokens& blocked) {
  model->zero_grad();
  Pass p;
  if (chunked) {
    auto out = model->forward_hidden(tokens, valid);
    CHECK_FALSE(out.logits.defined());
    std::tie(p.logp, p.entropy) = head_log_probs(model, out.hidden, tokens, 0.7, blocked, 3 * model->options().vocab);
  } else {
    std::tie(p.logp, p.entropy) = token_log_probs(model->forward(tokens, valid).logits, tokens, 0.7, blocked);
  }
  torch::manual_seed(5);
  const auto w = torch::rand(p.logp.sizes()), u = torch::rand(p.logp.sizes());
  ((p.logp * w).sum() + 0.3 * (p.entropy * u).sum()).backward();
  for (const auto& item : model->named_parameters())
    if (item.value().grad().defined()) p.grads[item.key()] = item.value().grad().clone();
  return p;
}

void same_passes(MoETransformer& model, double tolerance) {
  torch::manual_seed(3);
  const auto V = model->options().vocab;
  auto tokens = torch::randint(2, V, {3, 9}, torch::kLong);
  auto valid = torch::ones({3, 9}, torch::kBool);
  valid[1].narrow(0, 0, 2).fill_(false);  // a left-padded row
  BlockedTokens blocked;
  blocked.at = torch::tensor({4, 9 + 5, 18 + 8}, torch::kLong);  // columns 4, 5 and 8 of rows 0, 1, 2
  blocked.tokens = torch::rand({3, V}) < 0.3;
  for (std::int64_t i = 0; i < 3; ++i) {  // the sampled token itself was allowed
    const auto at = blocked.at[i].item<std::int64_t>();
    blocked.tokens[i][tokens.view(-1)[at].item<std::int64_t>()] = false;
  }
  const auto whole = pass(model, false, tokens, valid, blocked);
  const auto chunked = pass(model, true, tokens, valid, blocked);
  CHECK(torch::allclose(chunked.logp, whole.logp, tolerance, tolerance));
  CHECK(torch::allclose(chunked.entropy, whole.entropy, tolerance, tolerance));
  CHECK(chunked.logp.select(1, 0).abs().max().item<float>() == 0.0F);
  CHECK(chunked.grads.size() == whole.grads.size());
  std::size_t head = 0;
  for (const auto& [name, g] : whole.grads) {
    INFO(name);
    REQUIRE(chunked.grads.count(name) == 1);
    const auto gap = (chunked.grads.at(name) - g).abs().max().item<double>();
    CHECK(gap <= tolerance * (1 + g.abs().max().item<double>()));
    if (name.find("lm_head") != std::string::npos || name.find("tok_emb") != std::string::npos) ++head;
  }
  CHECK(head >= 1);  // the output layer's parameters got their gradients through the chunks
}

}  // namespace

TEST_CASE("log-probabilities a chunk at a time equal the whole logits' with their gradients, in RLX's layout",
          "[learner][memory]") {
  torch::manual_seed(1);
  MoETransformer model(test::small_transformer());
  same_passes(model, 1e-5);
}

TEST_CASE("log-probabilities a chunk at a time equal the whole logits' with their gradients, Hugging Face layouts",
          "[learner][memory]") {
  torch::manual_seed(2);
  MoETransformer moe(test::hf_small(HfFamily::qwen3_moe));
  same_passes(moe, 1e-5);
  auto dense = test::hf_small(HfFamily::llama);
  dense.tie_embeddings = true;
  MoETransformer tied(dense);
  same_passes(tied, 1e-5);
}

TEST_CASE("log-probabilities a chunk at a time agree in bf16 over fp32 master weights", "[learner][memory]") {
  auto o = test::hf_small(HfFamily::qwen3_moe);
  o.dtype = WeightDType::bf16;
  auto model = make_trainable_transformer(o, 4, false);
  REQUIRE(model->low_precision());
  same_passes(model, 2e-2);
}
