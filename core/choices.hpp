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
#include <type_traits>
#include <vector>

namespace rlx {

enum class RunMode { async, sync };                    // [run] mode
enum class PolicyKind { moe_mlp, moe_transformer };    // [policy] kind
enum class Algorithm { ppo, vtrace, grpo };            // [learner] algorithm
enum class Collectives { automatic, gloo, nccl };      // [learner] collectives ("auto", ...)
enum class Correction { decoupled, none };             // [learner] correction
enum class EnvPlacement { actor, local };              // [explorer] env_placement
enum class EnvProtocol { json, capnp };                // [external] protocol
enum class Launcher { local, ssh, slurm };             // [[node]] launcher
enum class OnRecordError { stop, go_on };              // [record] on_error ("stop", "continue")
// [policy] dtype: what a policy's weights are held and computed in, and
// the element type of a weight set's tensors (messages/types.hpp).
enum class WeightDType : unsigned char { f32, bf16 };

// Each enum's names, in enumerator order.
template <class E>
inline constexpr std::array<std::string_view, 0> kChoiceNames{};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<RunMode>{"async", "sync"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<PolicyKind>{"moe_mlp", "moe_transformer"};
template <> inline constexpr std::array<std::string_view, 3> kChoiceNames<Algorithm>{"ppo", "vtrace", "grpo"};
template <> inline constexpr std::array<std::string_view, 3> kChoiceNames<Collectives>{"auto", "gloo", "nccl"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<Correction>{"decoupled", "none"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<EnvPlacement>{"actor", "local"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<EnvProtocol>{"json", "capnp"};
template <> inline constexpr std::array<std::string_view, 3> kChoiceNames<Launcher>{"local", "ssh", "slurm"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<OnRecordError>{"stop", "continue"};
template <> inline constexpr std::array<std::string_view, 2> kChoiceNames<WeightDType>{"f32", "bf16"};

template <class E>
concept Choice = std::is_enum_v<E> && kChoiceNames<E>.size() > 0;

// "sync" for RunMode::sync.
template <Choice E>
std::string to_string(E e) {
  return std::string(kChoiceNames<E>.at(static_cast<std::size_t>(e)));
}

// RunMode::sync for "sync"; nothing for a name not in the table.
template <Choice E>
std::optional<E> choice_of(std::string_view name) {
  const auto& names = kChoiceNames<E>;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<E>(i);
  return std::nullopt;
}

// Every name, in order (for messages and the configuration's key table).
template <Choice E>
std::vector<std::string> choice_names() {
  return {kChoiceNames<E>.begin(), kChoiceNames<E>.end()};
}

}  // namespace rlx
