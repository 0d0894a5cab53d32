#include "tests/torch_catch.hpp"
#include <cmath>

#include "learner/run_stats.hpp"
#include "learner/mlp_trainer.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/weights_io.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {
TrainerOptions algorithm_options(const std::string& algorithm) {
  auto cfg = test::default_config();
  cfg.learner.algorithm = *choice_of<Algorithm>(algorithm);
  return TrainerOptions{cfg.learner, cfg.policy, 4, 2, 3};
}
}  // namespace

TEST_CASE("a PPO update bumps the version and changes the weights", "[learner][ppo]") {
  MlpTrainer t(algorithm_options("ppo"));
  auto before = t.weights().checksum;
  auto a = test::make_segment(16, 4, 0), b = test::make_segment(16, 4, 0, 1);
  auto stats = t.update({&a, &b}).value();
  CHECK(t.version() == 1);
  CHECK(t.weights().checksum != before);
  CHECK(stats.steps == 128);
  CHECK(std::isfinite(stats.policy_loss));
  CHECK(stats.expert_utilisation.size() == 4);
  CHECK(stats.correction.ratio_mean > 0);
}

TEST_CASE("a V-trace update bumps the version and changes the weights", "[learner][vtrace]") {
  MlpTrainer t(algorithm_options("vtrace"));
  auto before = t.weights().checksum;
  auto a = test::make_segment(16, 4, 0);
  t.update({&a});
  CHECK(t.version() == 1);
  CHECK(t.weights().checksum != before);
}

TEST_CASE("the same seed and segments give bit-identical weights", "[learner][determinism]") {
  MlpTrainer t1(algorithm_options("ppo")), t2(algorithm_options("ppo"));
  auto a = test::make_segment(16, 4, 0), b = test::make_segment(8, 4, 0, 1);
  for (int i = 0; i < 3; ++i) {
    t1.update({&a, &b});
    t2.update({&a, &b});
  }
  CHECK(t1.weights().checksum == t2.weights().checksum);
}

TEST_CASE("without the correction PPO's ratio is taken against the behaviour policy: the same update on fresh steps, "
          "another on stale ones",
          "[learner][ppo][staleness]") {
  auto with = algorithm_options("ppo"), without = algorithm_options("ppo");
  with.learner.correction = Correction::decoupled;
  without.learner.correction = Correction::none;
  // Fresh steps: their behaviour log-probs are the starting weights' own.
  auto fresh = test::make_segment(16, 4, 0);
  {
    const WeightSetData start = MlpTrainer(with).weights();
    auto policy = make_seeded_policy(
        PolicyOptions{4, 2, with.policy.hidden, with.policy.experts, with.policy.top_k}, 99);
    REQUIRE(import_weights(*policy, start).ok());
    torch::NoGradGuard no_grad;
    const auto n = static_cast<std::int64_t>(fresh.actions.size());
    auto obs = torch::from_blob(fresh.observations.data(), {n, 4}, torch::kFloat32).clone();
    auto logp = torch::log_softmax(policy->forward(obs).logits, -1);
    for (std::int64_t i = 0; i < n; ++i)
      fresh.behaviour_log_probs[static_cast<std::size_t>(i)] = logp[i][fresh.actions[static_cast<std::size_t>(i)]].item<float>();
  }
  MlpTrainer a(with), b(without);
  a.update({&fresh});
  b.update({&fresh});
  CHECK(test::max_diff(a.weights(), b.weights()) < 1e-6);
  // Stale steps: a behaviour policy far more sure of its actions (p = 0.9)
  // than the weights the update starts from.
  auto stale = test::make_segment(16, 4, 0);
  for (auto& lp : stale.behaviour_log_probs) lp = std::log(0.9f);
  MlpTrainer c(with), d(without);
  const auto sc = c.update({&stale}).value(), sd = d.update({&stale}).value();
  CHECK(test::max_diff(c.weights(), d.weights()) > 1e-4);
  // The behaviour ratio's statistics are reported either way.
  CHECK(sc.correction.ratio_mean == Approx(sd.correction.ratio_mean));
  CHECK(sd.correction.ratio_mean < 0.7);
}

TEST_CASE("run stats keep the mean return of the last 100 episodes", "[learner][metrics]") {
  RunStats s;
  CHECK(std::isnan(s.mean_return()));
  auto seg = test::make_segment(2, 1, 0);
  for (int i = 0; i < 150; ++i) {
    seg.episode_returns = {static_cast<float>(i)};
    s.add(seg);
  }
  CHECK(s.episodes() == 150);
  CHECK(s.window_full());
  CHECK(s.mean_return() == Approx((50 + 149) / 2.0));
  CHECK(s.env_steps() == 300);
}
