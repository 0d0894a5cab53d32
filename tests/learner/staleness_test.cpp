#include "tests/torch_catch.hpp"

#include "learner/admission.hpp"
#include "learner/losses.hpp"
#include "learner/returns.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("learner drops a segment older than max_staleness", "[learner][staleness]") {
  Admission a(2);
  auto at_limit = a.admit(test::make_segment(4, 2, 8), 10);
  CHECK(at_limit.verdict == Verdict::trained);
  CHECK(at_limit.lag == 2);
  auto too_old = a.admit(test::make_segment(4, 2, 7), 10);
  CHECK(too_old.verdict == Verdict::dropped_stale);
  CHECK(too_old.lag == 3);
  CHECK(a.accepted() == 1);
  CHECK(a.dropped_stale() == 1);
  CHECK(a.lag_histogram()[2] == 8);  // trained steps by lag
}

TEST_CASE("a segment spanning versions is judged by its oldest step", "[learner][staleness]") {
  Admission a(1);
  auto s = test::make_segment(4, 1, 9);
  s.policy_versions = {7, 8, 9, 9};  // weights swapped mid-segment
  CHECK(a.admit(s, 9).verdict == Verdict::dropped_stale);
  s.policy_versions = {8, 8, 9, 9};
  CHECK(a.admit(s, 9).verdict == Verdict::trained);
}

TEST_CASE("lag 0 is admitted even with max_staleness 0", "[learner][staleness]") {
  Admission a(0);
  CHECK(a.admit(test::make_segment(2, 1, 5), 5).verdict == Verdict::trained);
  CHECK(a.admit(test::make_segment(2, 1, 4), 5).verdict == Verdict::dropped_stale);
}

namespace {
torch::Tensor col(std::vector<float> v) { return torch::tensor(v).unsqueeze(1); }  // [T, 1]
}

TEST_CASE("V-trace targets match a hand-computed example", "[learner][vtrace]") {
  // gamma 0.9, rho_bar = c_bar = 1, ratios 2, 0.5, 1 -> rho = c = 1, 0.5, 1.
  auto log_rhos = col({std::log(2.0f), std::log(0.5f), 0.0f});
  auto r = vtrace(log_rhos, col({1, 0, 2}), col({0.5f, 1.0f, 0.2f}), col({1.0f, 0.2f, 0.4f}), col({1, 1, 1}), 0.9,
                  1.0, 1.0);
  // delta = 1.4, -0.41, 2.16; vs - V = 1.9058, 0.562, 2.16.
  CHECK(r.vs[0][0].item<float>() == Approx(2.4058));
  CHECK(r.vs[1][0].item<float>() == Approx(1.562));
  CHECK(r.vs[2][0].item<float>() == Approx(2.36));
  // pg_adv = rho (r + gamma vs_{t+1} - V), the bootstrap after the end.
  CHECK(r.pg_advantages[0][0].item<float>() == Approx(1.9058));
  CHECK(r.pg_advantages[1][0].item<float>() == Approx(0.562));
  CHECK(r.pg_advantages[2][0].item<float>() == Approx(2.16));
  CHECK(r.rhos[0][0].item<float>() == Approx(1.0));
}

TEST_CASE("V-trace on-policy equals n-step bootstrapped returns", "[learner][vtrace]") {
  auto zeros = col({0, 0, 0});
  auto r = vtrace(zeros, col({1, 1, 1}), col({0, 0, 0}), col({0, 0, 10}), col({1, 1, 1}), 0.5, 1.0, 1.0);
  CHECK(r.vs[0][0].item<float>() == Approx(1 + 0.5 + 0.25 + 0.125 * 10));
}

TEST_CASE("GAE matches a hand-computed example, and an episode end cuts it", "[learner][gae]") {
  auto g = gae(col({1, 0, 2}), col({0.5f, 1.0f, 0.2f}), col({1.0f, 0.2f, 0.4f}), col({1, 1, 1}), 0.9, 0.8);
  CHECK(g.advantages[2][0].item<float>() == Approx(2.16));
  CHECK(g.advantages[1][0].item<float>() == Approx(0.7352));
  CHECK(g.advantages[0][0].item<float>() == Approx(1.929344));
  CHECK(g.returns[0][0].item<float>() == Approx(1.929344 + 0.5));
  auto cut = gae(col({1, 0, 2}), col({0.5f, 1.0f, 0.2f}), col({1.0f, 0.0f, 0.4f}), col({1, 0, 1}), 0.9, 0.8);
  CHECK(cut.advantages[1][0].item<float>() == Approx(-1.0));
  CHECK(cut.advantages[0][0].item<float>() == Approx(0.68));
}

TEST_CASE("a truncation bootstraps from the state it was cut in, a termination from nothing, and both is a termination",
          "[learner][gae][truncation]") {
  // One env, four steps: neither, terminated, truncated, both.
  const auto values = col({1.0f, 2.0f, 3.0f, 4.0f});
  const auto boot = torch::tensor({5.0f});
  const auto terminated = col({0, 1, 0, 1}), truncated = col({0, 0, 1, 1});
  const auto cut_values = col({0, 0, 7.0f, 0});  // V of the state the time limit cut the episode in
  const auto b = bootstrap_targets(values, boot, terminated, truncated, cut_values);
  CHECK(b.next_values[0][0].item<float>() == 2.0f);  // neither: V(s_{t+1})
  CHECK(b.next_values[1][0].item<float>() == 0.0f);  // terminated: nothing after it
  CHECK(b.next_values[2][0].item<float>() == 7.0f);  // truncated: V(s_{t+1}) of the cut episode, not the reset state's
  CHECK(b.next_values[3][0].item<float>() == 0.0f);  // both: terminated
  CHECK(b.continues[0][0].item<float>() == 1.0f);
  for (int t = 1; t < 4; ++t) CHECK(b.continues[t][0].item<float>() == 0.0f);
  // The last step, neither: the segment's bootstrap value.
  const auto last = bootstrap_targets(col({1.0f, 2.0f}), boot, col({0, 0}), col({0, 0}), col({0, 0}));
  CHECK(last.next_values[1][0].item<float>() == 5.0f);
  // A segment of an older build carries no cut states: V(s_t) stands in, as it did.
  const auto old = bootstrap_targets(values, boot, col({0, 1, 0, 0}), col({0, 0, 1, 0}), values);
  CHECK(old.next_values[2][0].item<float>() == 3.0f);
}

TEST_CASE("behaviour ratios are truncated at rho_bar", "[learner][staleness]") {
  auto prox = torch::log(torch::tensor({3.0f, 0.5f, 1.0f}));
  auto behaviour = torch::zeros({3});
  auto w = truncated_behaviour_weights(prox, behaviour, 1.5);
  CHECK(w[0].item<float>() == Approx(1.5));
  CHECK(w[1].item<float>() == Approx(0.5));
  CHECK(w[2].item<float>() == Approx(1.0));
  LossStats stats;
  auto adv = torch::ones({3});
  auto loss = decoupled_ppo_loss(prox, prox, behaviour, adv, 0.2, 1.5, &stats);
  CHECK(loss.item<float>() == Approx(-(1.5 + 0.5 + 1.0) / 3));
  CHECK(stats.ratio_max == Approx(3.0));
  CHECK(stats.truncated_fraction == Approx(1.0 / 3));
}

TEST_CASE("the decoupled PPO loss clips around the proximal policy", "[learner][ppo]") {
  auto prox = torch::zeros({2});
  auto behaviour = torch::zeros({2});
  auto adv = torch::tensor({1.0f, -1.0f});
  auto moved = torch::log(torch::tensor({1.5f, 0.5f})).requires_grad_(true);
  auto loss = decoupled_ppo_loss(moved, prox, behaviour, adv, 0.2, 1.0);
  // min(1.5, 1.2) * 1 and min(-0.5, -0.8) = -0.8 -> -(1.2 - 0.8) / 2
  CHECK(loss.item<float>() == Approx(-0.2));
  loss.backward();
  CHECK(moved.grad().abs().sum().item<float>() == Approx(0.0));  // both clipped: no gradient
}

TEST_CASE("without the decoupling the PPO loss clips around the behaviour policy and reports the same ratios",
          "[learner][ppo][staleness]") {
  auto prox = torch::log(torch::tensor({2.0f, 0.5f}));  // the weights at the update's start
  auto behaviour = torch::zeros({2});
  auto adv = torch::ones({2});
  LossStats with, without;
  auto decoupled = decoupled_ppo_loss(prox, prox, behaviour, adv, 0.2, 1.0, &with);
  auto plain = decoupled_ppo_loss(prox, prox, behaviour, adv, 0.2, 1.0, &without, {}, false);
  // Decoupled: r = 1, w = min(1, 2) and min(1, 0.5) -> -(1 + 0.5) / 2.
  CHECK(decoupled.item<float>() == Approx(-0.75));
  // Plain: r = 2 and 0.5 against the behaviour policy, clipped to 1.2 and 0.5 -> -(1.2 + 0.5) / 2.
  CHECK(plain.item<float>() == Approx(-0.85));
  CHECK(without.ratio_max == Approx(with.ratio_max));
  CHECK(without.ratio_mean == Approx(1.25));
}
