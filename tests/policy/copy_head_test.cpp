// The copy head (policy/copy_head.hpp): decoding through the KV cache
// gives what one pass gives, its mixture is a distribution, its gate shut
// leaves the policy as it was, a start without it loads, and it learns to
// write tokens it was never trained to write, which the policy without it
// cannot (the held-out names of docs/workspace.md).
#include <torch/torch.h>

#include <filesystem>

#include "policy/hf_checkpoint.hpp"
#include "policy/moe_transformer.hpp"
#include "tests/helpers.hpp"
#include "tests/policy/transformer_fixture.hpp"
#include "tests/torch_catch.hpp"

using namespace rlx;

namespace {

TransformerOptions with_copy(bool copy = true) {
  auto o = test::small_transformer(32, 20);
  o.copy_head = copy;
  return o;
}

void set_gate(MoETransformer& model, float bias) {
  torch::NoGradGuard guard;
  model->named_parameters(true)["copy.gate.bias"].fill_(bias);
}

// Sequences "c1..c5 SEP c1..c5" of content tokens in [low, high) (SEP = 1):
// the second half is the first copied.
torch::Tensor copy_batch(std::int64_t n, std::int64_t low, std::int64_t high) {
  auto content = torch::randint(low, high, {n, 5}, torch::kLong);
  return torch::cat({content, torch::ones({n, 1}, torch::kLong), content}, 1);  // [n, 11]
}

torch::Tensor second_half_logp(MoETransformer& model, const torch::Tensor& seq) {
  auto out = model->forward(seq, torch::ones_like(seq, torch::kBool));
  return torch::log_softmax(out.logits.narrow(1, 5, 5), -1);  // predicts columns 6..10
}

// Greedy accuracy on the second half, each token given the ones before it.
double copy_accuracy(MoETransformer& model, const torch::Tensor& seq) {
  torch::NoGradGuard guard;
  auto picked = second_half_logp(model, seq).argmax(-1);
  return (picked == seq.narrow(1, 6, 5)).to(torch::kFloat32).mean().item<double>();
}

// Trains on content tokens 2..11 only; returns the accuracy on sequences of
// 12..19, tokens no training sequence holds.
double trained_then_unseen_accuracy(bool copy) {
  auto model = make_seeded_transformer(with_copy(copy), 3);
  // Opener than kCopyGateBias: from 0.047 the vocabulary head learns the
  // training tokens before the pointer does, and no unseen token is copied.
  if (copy) set_gate(model, -1.0f);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(3e-3));
  torch::manual_seed(17);
  for (int step = 0; step < 300; ++step) {
    auto seq = copy_batch(32, 2, 12);
    auto loss = -second_half_logp(model, seq).gather(2, seq.narrow(1, 6, 5).unsqueeze(-1)).mean();
    adam.zero_grad();
    loss.backward();
    adam.step();
  }
  CHECK(copy_accuracy(model, copy_batch(64, 2, 12)) > 0.9);  // both learn the training tokens
  return copy_accuracy(model, copy_batch(64, 12, 20));
}

}  // namespace

TEST_CASE("with a copy head, decoding through the KV cache across padding, a compaction and a row started over gives "
          "what one pass over each whole sequence gives",
          "[policy][transformer][copy]") {
  auto model = make_seeded_transformer(with_copy(), 5);
  set_gate(model, 0.0f);  // half the mass on the pointer
  torch::NoGradGuard guard;
  auto tokens = torch::randint(2, 20, {3, 9}, torch::kLong);
  auto valid = torch::ones({3, 9}, torch::kBool);
  valid[1].narrow(0, 0, 3).fill_(false);  // row 1 left-padded
  valid[2][5] = false;                    // row 2 waits a step (a tool's turn) mid-sequence
  auto whole = model->forward(tokens, valid);
  auto cache = model->new_cache(3, 16);
  std::vector<torch::Tensor> logits{model->step(tokens.narrow(1, 0, 4), valid.narrow(1, 0, 4), cache).logits};
  for (int i = 4; i < 9; ++i) logits.push_back(model->step(tokens.narrow(1, i, 1), valid.narrow(1, i, 1), cache).logits);
  auto stepped = torch::cat(logits, 1);
  auto mask = valid.unsqueeze(-1).expand_as(stepped);
  CHECK(torch::allclose(stepped.masked_select(mask), whole.logits.masked_select(mask), 1e-4, 1e-5));

  // Compacted (row 1's padding and row 2's gap dropped), then one more token each.
  compact_cache(cache);
  auto next = torch::tensor({{7}, {8}, {9}}, torch::kLong);
  auto after = model->step(next, torch::ones({3, 1}, torch::kBool), cache).logits;
  for (std::int64_t r = 0; r < 3; ++r) {
    auto row = torch::cat({tokens[r].masked_select(valid[r]), next[r]}).unsqueeze(0);
    auto alone = model->forward(row, torch::ones_like(row, torch::kBool)).logits;
    CHECK(torch::allclose(after[r][0], alone[0][row.size(1) - 1], 1e-4, 1e-5));
  }
  // Row 0 starts over: its new tokens point only at themselves.
  reset_cache_row(cache, 0);
  auto fresh = torch::tensor({{4, 4, 6}}, torch::kLong);
  auto restarted = model->step(torch::cat({fresh, torch::zeros({2, 3}, torch::kLong)}),
                               torch::cat({torch::ones({1, 3}, torch::kBool), torch::zeros({2, 3}, torch::kBool)}), cache);
  auto alone = model->forward(fresh, torch::ones_like(fresh, torch::kBool)).logits;
  CHECK(torch::allclose(restarted.logits[0], alone[0], 1e-4, 1e-5));
}

TEST_CASE("a copy head's mixture is a distribution that, with the gate open, points only at the context's tokens, and "
          "with it shut is the policy without the head",
          "[policy][transformer][copy]") {
  auto tokens = torch::tensor({{3, 9, 3, 14, 9, 5}}, torch::kLong);
  auto valid = torch::ones_like(tokens, torch::kBool);
  auto model = make_seeded_transformer(with_copy(), 6);
  torch::NoGradGuard guard;
  set_gate(model, 30.0f);
  auto open = model->forward(tokens, valid).logits.exp()[0];  // [6, 20]
  CHECK(torch::allclose(open.sum(-1), torch::ones({6}), 1e-4, 1e-5));
  for (std::int64_t t = 0; t < 6; ++t) {
    auto seen = torch::zeros({20}, torch::kBool);
    for (std::int64_t j = 0; j <= t; ++j) seen[tokens[0][j].item<std::int64_t>()] = true;
    CHECK(open[t].masked_select(seen.logical_not()).max().item<float>() < 1e-6f);
  }
  CHECK(open[0][3].item<float>() == Approx(1.0).margin(1e-5));  // the first token can only point at itself

  // The head is built after every other parameter, so the same seed without it is the same policy.
  set_gate(model, -30.0f);
  auto plain = make_seeded_transformer(with_copy(false), 6);
  auto shut = model->forward(tokens, valid).logits;
  CHECK(torch::allclose(shut, torch::log_softmax(plain->forward(tokens, valid).logits, -1), 1e-4, 1e-5));
  set_gate(model, -1.0f);
  CHECK_FALSE(torch::allclose(model->forward(tokens, valid).logits, shut, 1e-2, 1e-2));
}

TEST_CASE("weights saved without a copy head start a policy with one whose head starts fresh and says so, a policy "
          "without one refuses weights with one, and a Hugging Face start refuses one",
          "[policy][copy][init]") {
  test::TempDir dir("rlx-copy-init");
  const auto plain_file = (dir.path / "plain.pt").string(), copy_file = (dir.path / "copy.pt").string();
  auto plain = make_seeded_transformer(with_copy(false), 8);
  torch::save(plain, plain_file);
  auto copying = make_seeded_transformer(with_copy(), 9);
  auto note = load_policy_init(copying, plain_file);
  REQUIRE(note.ok());
  CHECK(*note == "no copy head in it: the head starts fresh");
  auto mine = copying->named_parameters(true), theirs = plain->named_parameters(true);
  for (const auto& p : theirs) CHECK(torch::equal(mine[p.key()], p.value()));
  CHECK(mine["copy.gate.bias"].item<float>() == static_cast<float>(kCopyGateBias));

  torch::save(copying, copy_file);
  auto again = make_seeded_transformer(with_copy(), 10);
  note = load_policy_init(again, copy_file);
  REQUIRE(note.ok());
  CHECK(note->empty());
  for (const auto& p : again->named_parameters(true)) CHECK(torch::equal(mine[p.key()], p.value()));

  // Weights whose copy head lacks a tensor (its gate here): that one starts as built, the rest is read.
  {
    struct HeadWithoutGate : torch::nn::Module {
      explicit HeadWithoutGate(std::int64_t d) {
        for (const char* name : {"q", "k"}) register_module(name, torch::nn::Linear(d, d));
      }
    } partial(with_copy().d_model);
    torch::serialize::OutputArchive file, head;
    plain->save(file);
    partial.save(head);
    file.write("copy", head);
    const auto partial_file = (dir.path / "partial-head.pt").string();
    file.save_to(partial_file);
    auto loaded = make_seeded_transformer(with_copy(), 11);
    note = load_policy_init(loaded, partial_file);
    REQUIRE(note.ok());
    CHECK(*note == "its copy head has no copy.gate.weight, copy.gate.bias: those start as built");
    auto got = loaded->named_parameters(true);
    auto old = partial.named_parameters(true);
    CHECK(torch::equal(got["copy.q.weight"], old["q.weight"]));
    CHECK(torch::equal(got["copy.k.bias"], old["k.bias"]));
    for (const auto& p : theirs) CHECK(torch::equal(got[p.key()], p.value()));
    CHECK(got["copy.gate.bias"].item<float>() == static_cast<float>(kCopyGateBias));
  }
  // Weights of another width are refused with the parameter that differs.
  auto narrow_options = with_copy(false);
  narrow_options.d_model /= 2;
  torch::save(make_seeded_transformer(narrow_options, 12), (dir.path / "narrow.pt").string());
  auto narrow = load_policy_init(plain, (dir.path / "narrow.pt").string());
  REQUIRE_FALSE(narrow.ok());
  CHECK_THAT(narrow.error().message, Catch::Contains("not weights of this policy shape ("));
  CHECK_THAT(narrow.error().message, Catch::Contains("this policy's"));

  auto refused = load_policy_init(plain, copy_file);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("copy_head = true"));

  PolicyConfig hf;  // a Hugging Face start has no place for one
  hf.kind = PolicyKind::moe_transformer;
  hf.copy_head = true;
  hf.init = "hf:" + dir.path.string();
  auto shape = policy_transformer_options(hf, 20);
  REQUIRE_FALSE(shape.ok());
  CHECK_THAT(shape.error().message, Catch::Contains("copy_head"));
}

TEST_CASE("a policy with a copy head learns to write tokens it was never trained to write, which the same policy "
          "without one does not",
          "[policy][copy][slow]") {
  const double with = trained_then_unseen_accuracy(true), without = trained_then_unseen_accuracy(false);
  INFO("unseen tokens copied: with a copy head " << with << ", without " << without);
  CHECK(with > 0.75);  // 0.87 as built
  CHECK(without < 0.1);  // 0: its vocabulary head never learnt to write them
}
