// CartPole, with the behaviour of Gymnasium's CartPole-v1: Euler
// integration with its constants, termination when |x| > 2.4 or
// |theta| > 12 degrees, truncation at 500 steps, reward 1 per step
// (the terminating step included), initial state uniform in [-0.05, 0.05].
#pragma once

#include <array>
#include <random>

#include "envs/env.hpp"

namespace rlx {

class CartPole : public Env {
 public:
  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassCart + kMassPole;
  static constexpr double kLength = 0.5;  // half the pole's length
  static constexpr double kPoleMassLength = kMassPole * kLength;
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;
  static constexpr double kThetaThreshold = 12.0 * 2.0 * 3.14159265358979323846 / 360.0;
  static constexpr double kXThreshold = 2.4;
  static constexpr int kMaxSteps = 500;

  using State = std::array<double, 4>;  // x, x_dot, theta, theta_dot

  explicit CartPole(std::uint64_t seed);

  const EnvSpec& spec() const override { return spec_; }
  void reset(float* obs) override;
  StepOutcome step(std::int64_t action, float* obs) override;

  // For tests: the exact state and a way to set it.
  const State& state() const { return state_; }
  void set_state(const State& s) { state_ = s; }
  int elapsed_steps() const { return steps_; }

  // One Euler step of the dynamics (pure; used by step() and by tests).
  static State dynamics(const State& s, std::int64_t action);

 private:
  void write_obs(float* obs) const;

  EnvSpec spec_{"cartpole", 4, 2, kMaxSteps};
  std::mt19937_64 rng_;
  State state_{};
  int steps_ = 0;
};

}  // namespace rlx
