// The enum-like settings of the topology file, as enum classes, each with
// its names in one table: parsed once in core/config (an unknown name is
// refused there, with the names allowed), compared as enums everywhere
// else, written back by name. An enumerator's value is its index in the
// table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlx {

enum class RunMode { async, sync };                    // [run] mode
enum class PolicyKind { moe_mlp, moe_transformer };    // [policy] kind
enum class Algorithm { ppo, vtrace, grpo };            // [learner] algorithm
enum class Collectives { automatic, gloo, nccl };      // [learner] collectives ("auto", ...)
enum class EnvPlacement { actor, local };              // [explorer] env_placement
enum class EnvProtocol { json, capnp };                // [external] protocol
enum class Launcher { local, ssh, slurm };             // [[node]] launcher

template <class E>
struct ChoiceNames;  // static constexpr std::array<std::string_view, N> names, in enumerator order

template <>
struct ChoiceNames<RunMode> {
  static constexpr std::array<std::string_view, 2> names{"async", "sync"};
};
template <>
struct ChoiceNames<PolicyKind> {
  static constexpr std::array<std::string_view, 2> names{"moe_mlp", "moe_transformer"};
};
template <>
struct ChoiceNames<Algorithm> {
  static constexpr std::array<std::string_view, 3> names{"ppo", "vtrace", "grpo"};
};
template <>
struct ChoiceNames<Collectives> {
  static constexpr std::array<std::string_view, 3> names{"auto", "gloo", "nccl"};
};
template <>
struct ChoiceNames<EnvPlacement> {
  static constexpr std::array<std::string_view, 2> names{"actor", "local"};
};
template <>
struct ChoiceNames<EnvProtocol> {
  static constexpr std::array<std::string_view, 2> names{"json", "capnp"};
};
template <>
struct ChoiceNames<Launcher> {
  static constexpr std::array<std::string_view, 3> names{"local", "ssh", "slurm"};
};

template <class E>
concept Choice = requires { ChoiceNames<E>::names; };

// "sync" for RunMode::sync.
template <Choice E>
std::string to_string(E e) {
  return std::string(ChoiceNames<E>::names.at(static_cast<std::size_t>(e)));
}

// RunMode::sync for "sync"; nothing for a name not in the table.
template <Choice E>
std::optional<E> choice_of(std::string_view name) {
  const auto& names = ChoiceNames<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

// Every name, in order (for messages and the configuration's key table).
template <Choice E>
std::vector<std::string> choice_names() {
  return {ChoiceNames<E>::names.begin(), ChoiceNames<E>::names.end()};
}

}  // namespace rlx
