// The environment interface, EnvPool style: a spec plus reset() and step()
// that write into caller-provided buffers. Single-threaded; an Env is owned
// by exactly one vector env (and so by one actor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rlx {

struct EnvSpec {
  std::string name;                 // registry name
  int obs_dim = 0;                  // floats per observation
  int num_actions = 0;              // discrete actions 0..num_actions-1
  int max_episode_steps = 0;        // truncation limit (0 = none)
};

struct StepOutcome {
  float reward = 0;
  bool terminated = false;          // the episode ended by the MDP's own rule
  bool truncated = false;           // the episode was cut by the time limit
};

class Env {
 public:
  virtual ~Env() = default;
  virtual const EnvSpec& spec() const = 0;
  // Starts an episode; writes spec().obs_dim floats to `obs`.
  virtual void reset(float* obs) = 0;
  // REQUIRES: 0 <= action < num_actions, reset() called since the last end.
  virtual StepOutcome step(std::int64_t action, float* obs) = 0;
};

// Makes env number `env_id` of a run whose base seed is `seed` (an env
// seeds its RNG with seed + env_id).
using EnvFactory = std::function<std::unique_ptr<Env>(std::uint64_t seed, std::uint64_t env_id)>;

// Name -> factory. Built by main() (no global registry) and passed down.
class EnvRegistry {
 public:
  void add(const std::string& name, EnvFactory factory);
  // nullptr when the name is unknown.
  const EnvFactory* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, EnvFactory>> entries_;
};

// The registry of every environment built into RLX.
EnvRegistry builtin_envs();

}  // namespace rlx
