#include <chrono>

#include <catch2/catch.hpp>

#include "envs/classic/cartpole.hpp"
#include "envs/external/external_env.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

ExternalEnvOptions python(const std::string& script, std::vector<std::string> args = {}) {
  ExternalEnvOptions o;
  o.argv = {"python3", std::string(RLX_SOURCE_DIR) + "/" + script};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.timeout = 2000ms;
  o.max_restarts = 2;
  o.name = script;
  return o;
}

ExternalEnvOptions bad(const std::string& mode, int at = 3) {
  auto o = python("tests/envs/fixtures/bad_env.py", {mode, std::to_string(at)});
  // Short enough that hangs are found fast, long enough that a Python
  // start on a loaded 2-core CI machine is not taken for one.
  o.timeout = 1500ms;
  return o;
}

}  // namespace

TEST_CASE("the Python CartPole follows the same equations through the JSON protocol", "[envs][external]") {
  ExternalEnv env(python("examples/envs/cartpole.py"), 7, 0, 3);
  CHECK(env.spec().obs_dim == 4);
  CHECK(env.spec().num_actions == 2);
  EnvStepResultData r;
  env.reset(r);
  REQUIRE(r.observations.size() == 12);
  int ends = 0;
  for (int t = 0; t < 120; ++t) {
    const std::vector<std::int64_t> actions{t % 2, 1, (t / 3) % 2};
    std::vector<float> before = r.observations;
    env.step(actions, r);
    for (int i = 0; i < 3; ++i) {
      if (r.terminated[i] || r.truncated[i]) {
        ++ends;
        continue;  // the observation is the next episode's first
      }
      CartPole::State s{before[4 * i], before[4 * i + 1], before[4 * i + 2], before[4 * i + 3]};
      auto next = CartPole::dynamics(s, actions[i]);
      for (int k = 0; k < 4; ++k) CHECK(r.observations[4 * i + k] == Approx(next[k]).margin(1e-5));
    }
  }
  CHECK(ends > 0);  // always pushing right ends episodes
  CHECK(env.restarts() == 0);
}

TEST_CASE("the Cap'n Proto framing of the protocol steps a served env", "[envs][external]") {
  ExternalEnvOptions o;
  o.argv = {RLX_BINARY, "serve-env", "cartpole", "--protocol", "capnp"};
  o.protocol = EnvProtocol::capnp;
  o.timeout = 10000ms;  // bounds a hang only; a sanitizer build starts the served env slowly
  ExternalEnv env(o, 1, 0, 4);
  EnvStepResultData r;
  env.reset(r);
  for (int t = 0; t < 50; ++t) env.step({0, 1, 0, 1}, r);
  CHECK(r.observations.size() == 16);
  CHECK(env.restarts() == 0);
}

TEST_CASE("an env process that crashes is restarted and its episodes counted lost", "[envs][external][defensive]") {
  ExternalEnv env(bad("crash"), 1, 0, 2);
  EnvStepResultData r;
  env.reset(r);
  env.step({0, 0}, r);
  env.step({0, 0}, r);
  CHECK(env.restarts() == 0);
  env.step({0, 0}, r);  // the process exits here
  CHECK(env.restarts() == 1);
  CHECK((r.lost == std::vector<std::uint8_t>{1, 1}));
  CHECK((r.truncated == std::vector<std::uint8_t>{1, 1}));
  CHECK(env.lost_episodes() == 2);
  env.step({0, 0}, r);  // the restarted process answers again
  CHECK((r.lost == std::vector<std::uint8_t>{0, 0}));
}

TEST_CASE("an env process that hangs past its timeout is restarted", "[envs][external][defensive]") {
  ExternalEnv env(bad("hang"), 1, 0, 1);
  EnvStepResultData r;
  env.reset(r);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) env.step({1}, r);
  CHECK(env.restarts() == 1);
  CHECK(r.lost[0] == 1);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
}

TEST_CASE("garbage, wrong sizes and reported errors each cost a restart", "[envs][external][defensive]") {
  for (const char* mode : {"garbage", "wrong_size", "error", "bad_hints"}) {
    INFO(mode);
    ExternalEnv env(bad(mode), 1, 0, 2);
    EnvStepResultData r;
    env.reset(r);
    for (int i = 0; i < 3; ++i) env.step({0, 1}, r);
    CHECK(env.restarts() == 1);
    CHECK(env.lost_episodes() == 2);
  }
}

TEST_CASE("an env that never answers reset exhausts its restarts and fails clearly", "[envs][external][defensive]") {
  auto o = bad("mute_reset");
  o.max_restarts = 1;
  ExternalEnv env(o, 1, 0, 1);
  EnvStepResultData r;
  try {
    env.reset(r);
    FAIL("reset should have failed");
  } catch (const EnvFailure& e) {
    std::string what = e.what();
    CHECK(what.find("no answer within 1500 ms") != std::string::npos);
    CHECK(what.find("restart budget of 1 spent") != std::string::npos);
  }
}

TEST_CASE("a command that cannot start fails with the reason", "[envs][external][defensive]") {
  ExternalEnvOptions o;
  o.argv = {"/nonexistent/rlx-env"};
  o.max_restarts = 1;
  o.timeout = 300ms;
  CHECK_THROWS_AS(ExternalEnv(o, 1, 0, 1), EnvFailure);
}

TEST_CASE("exec: names split into a command line", "[envs][external]") {
  CHECK((exec_argv("exec:python3  env.py --fast") == std::vector<std::string>{"python3", "env.py", "--fast"}));
  CHECK(exec_argv("cartpole").empty());
}

TEST_CASE("hints and deferred-reward payloads pass through the protocol", "[envs][external]") {
  ExternalEnv env(bad("hints"), 1, 0, 2);
  EnvStepResultData r;
  env.reset(r);
  env.step({0, 1}, r);
  CHECK((r.reward_payloads == std::vector<std::string>{"answer 42", "answer 42"}));
  CHECK(env.restarts() == 0);
}
