#include "tests/torch_catch.hpp"

#include "learner/run_stats.hpp"
#include "learner/mlp_trainer.hpp"
#include "policy/weights_io.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {
TrainerOptions options(const std::string& algorithm) {
  auto cfg = test::default_config();
  cfg.learner.algorithm = *choice_of<Algorithm>(algorithm);
  return TrainerOptions{cfg.learner, cfg.policy, 4, 2, 3};
}
}  // namespace

TEST_CASE("a PPO update bumps the version and changes the weights", "[learner][ppo]") {
  MlpTrainer t(options("ppo"));
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
  MlpTrainer t(options("vtrace"));
  auto before = t.weights().checksum;
  auto a = test::make_segment(16, 4, 0);
  t.update({&a});
  CHECK(t.version() == 1);
  CHECK(t.weights().checksum != before);
}

TEST_CASE("the same seed and segments give bit-identical weights", "[learner][determinism]") {
  MlpTrainer t1(options("ppo")), t2(options("ppo"));
  auto a = test::make_segment(16, 4, 0), b = test::make_segment(8, 4, 0, 1);
  for (int i = 0; i < 3; ++i) {
    t1.update({&a, &b});
    t2.update({&a, &b});
  }
  CHECK(t1.weights().checksum == t2.weights().checksum);
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
