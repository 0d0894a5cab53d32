#include <cmath>

#include <catch2/catch.hpp>

#include "envs/classic/cartpole.hpp"
#include "envs/vector_env.hpp"

using namespace rlx;

TEST_CASE("cartpole follows Gymnasium's Euler equations", "[envs][cartpole]") {
  // From rest, pushing right: temp = 10/1.1, thetaacc = -temp / (0.5 (4/3 - 0.1/1.1)),
  // xacc = temp - 0.05 thetaacc / 1.1; positions move with the old velocities.
  auto s = CartPole::dynamics({0, 0, 0, 0}, 1);
  CHECK(s[0] == Approx(0.0).margin(1e-12));
  CHECK(s[1] == Approx(0.02 * 9.75609756).epsilon(1e-7));
  CHECK(s[2] == Approx(0.0).margin(1e-12));
  CHECK(s[3] == Approx(0.02 * -14.63414634).epsilon(1e-7));

  // A general state, against the formulas written out.
  const double x = 0.1, xd = -0.3, th = 0.05, thd = 0.4;
  const double f = -10.0, c = std::cos(th), sn = std::sin(th);
  const double temp = (f + 0.05 * thd * thd * sn) / 1.1;
  const double thacc = (9.8 * sn - c * temp) / (0.5 * (4.0 / 3.0 - 0.1 * c * c / 1.1));
  const double xacc = temp - 0.05 * thacc * c / 1.1;
  auto t = CartPole::dynamics({x, xd, th, thd}, 0);
  CHECK(t[0] == Approx(x + 0.02 * xd));
  CHECK(t[1] == Approx(xd + 0.02 * xacc));
  CHECK(t[2] == Approx(th + 0.02 * thd));
  CHECK(t[3] == Approx(thd + 0.02 * thacc));
}

TEST_CASE("cartpole starts uniformly within 0.05 and seeds each env with seed + env_id", "[envs][cartpole]") {
  CartPole a(11), b(11), c(12);
  float oa[4], ob[4], oc[4];
  a.reset(oa);
  b.reset(ob);
  c.reset(oc);
  for (int i = 0; i < 4; ++i) {
    CHECK(std::abs(oa[i]) <= 0.05f);
    CHECK(oa[i] == ob[i]);
  }
  CHECK((oa[0] != oc[0] || oa[1] != oc[1]));
  const EnvRegistry registry = builtin_envs();
  const EnvFactory* factory = registry.find("cartpole");
  REQUIRE(factory);
  VectorEnv v(*factory, 10, 1, 2);  // envs 1 and 2 of a run seeded 10
  EnvStepResultData r;
  v.reset(r);
  CHECK(r.observations[0] == oa[0]);  // env 1: seed 11
}

TEST_CASE("cartpole terminates past 12 degrees or 2.4 and pays 1 for the last step", "[envs][cartpole]") {
  CartPole env(1);
  float obs[4];
  env.reset(obs);
  env.set_state({0, 0, 0.2094, 1.0});  // just inside 12 degrees, falling
  auto o = env.step(1, obs);
  CHECK(o.terminated);
  CHECK_FALSE(o.truncated);
  CHECK(o.reward == 1.0f);
  env.reset(obs);
  env.set_state({2.39, 1.0, 0, 0});
  CHECK(env.step(1, obs).terminated);
}

TEST_CASE("cartpole truncates at 500 steps", "[envs][cartpole]") {
  CartPole env(3);
  float obs[4];
  env.reset(obs);
  StepOutcome o;
  for (int i = 0; i < 500; ++i) {
    env.set_state({0, 0, 0, 0});  // keep it balanced
    o = env.step(i % 2, obs);
    if (i < 499) REQUIRE_FALSE((o.terminated || o.truncated));
  }
  CHECK(o.truncated);
  CHECK_FALSE(o.terminated);
}

TEST_CASE("a vector env resets an ended episode and reports the end", "[envs][vector]") {
  VectorEnv v(*builtin_envs().find("cartpole"), 1, 0, 4);
  EnvStepResultData r;
  v.reset(r);
  int ends = 0;
  for (int t = 0; t < 200; ++t) {
    v.step({1, 1, 1, 1}, r);  // always right: falls within ~10 steps
    for (int i = 0; i < 4; ++i) ends += r.terminated[i];
    for (float x : r.observations) REQUIRE(std::abs(x) < 5.0f);
  }
  CHECK(ends >= 4 * 10);
}
