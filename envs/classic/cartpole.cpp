#include "envs/classic/cartpole.hpp"

#include <cmath>

namespace rlx {

CartPole::CartPole(std::uint64_t seed) : rng_(seed) {}

void CartPole::reset(float* obs) {
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  for (auto& v : state_) v = u(rng_);
  steps_ = 0;
  write_obs(obs);
}

CartPole::State CartPole::dynamics(const State& s, std::int64_t action) {
  auto [x, x_dot, theta, theta_dot] = s;
  const double force = action == 1 ? kForceMag : -kForceMag;
  const double costheta = std::cos(theta);
  const double sintheta = std::sin(theta);
  const double temp = (force + kPoleMassLength * theta_dot * theta_dot * sintheta) / kTotalMass;
  const double thetaacc =
      (kGravity * sintheta - costheta * temp) / (kLength * (4.0 / 3.0 - kMassPole * costheta * costheta / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  // Gymnasium's "euler" integrator: positions first, with the old velocities.
  x = x + kTau * x_dot;
  x_dot = x_dot + kTau * xacc;
  theta = theta + kTau * theta_dot;
  theta_dot = theta_dot + kTau * thetaacc;
  return {x, x_dot, theta, theta_dot};
}

StepOutcome CartPole::step(std::int64_t action, float* obs) {
  state_ = dynamics(state_, action);
  ++steps_;
  StepOutcome out;
  out.reward = 1.0f;
  const double x = state_[0], theta = state_[2];
  out.terminated = x < -kXThreshold || x > kXThreshold || theta < -kThetaThreshold || theta > kThetaThreshold;
  out.truncated = !out.terminated && steps_ >= kMaxSteps;
  write_obs(obs);
  return out;
}

void CartPole::write_obs(float* obs) const {
  for (int i = 0; i < 4; ++i) obs[i] = static_cast<float>(state_[i]);
}

}  // namespace rlx
