#include "envs/env.hpp"

#include "envs/classic/cartpole.hpp"

namespace rlx {

void EnvRegistry::add(const std::string& name, EnvFactory factory) { entries_.emplace_back(name, std::move(factory)); }

const EnvFactory* EnvRegistry::find(const std::string& name) const {
  for (const auto& [n, f] : entries_)
    if (n == name) return &f;
  return nullptr;
}

std::vector<std::string> EnvRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

EnvRegistry builtin_envs() {
  EnvRegistry r;
  r.add("cartpole", [](std::uint64_t seed, std::uint64_t env_id) {
    return std::make_unique<CartPole>(seed + env_id);
  });
  return r;
}

}  // namespace rlx
