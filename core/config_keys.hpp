// The topology file's keys, declared once per section: name, type, the
// range or values allowed (the default is the section struct's own, in
// core/config.hpp). The declarations drive parsing and validation
// (config.cpp), the TOML writer (config_toml.cpp) and the test that holds
// docs/topology.md to them. Checks across keys stay in parse_config.
// Private to core/ and its tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include <toml++/toml.h>

#include "core/choices.hpp"
#include "core/config.hpp"
#include "core/config_reader.hpp"

namespace rlx::config_keys {

enum class Kind { string, boolean, integer, number, strings, table };

// An enum-class field (core/choices.hpp), read and written by name.
template <class S>
struct ChoiceField {
  std::function<std::string(const S&)> get;  // the name of the enumerator it holds
  std::function<void(S&, std::size_t)> set;  // holds the enumerator of that index
};

// One key of section struct S.
template <class S>
struct Key {
  using Field = std::variant<std::monostate, std::string S::*, bool S::*, std::int64_t S::*, std::uint64_t S::*,
                             double S::*, std::vector<std::string> S::*, ChoiceField<S>>;
  std::string name;
  Kind kind = Kind::string;
  Field field;                        // monostate: a sub-table, read by its section's own code
  double lo = 0, hi = 0;              // integer and number: the range
  bool lo_open = false;               // number: (lo, hi] instead of [lo, hi]
  std::vector<std::string> allowed;   // string: the values allowed (empty: any string)
  Errc not_allowed = Errc::config_range;
  bool required = false;              // no default: every table must set it
};

template <class S, class F>
Key<S> make_key(std::string name, Kind kind, F field) {
  Key<S> k;
  k.name = std::move(name);
  k.kind = kind;
  k.field = field;
  return k;
}

template <class S>
Key<S> text(std::string name, std::string S::*f, std::vector<std::string> allowed = {},
            Errc not_allowed = Errc::config_range) {
  Key<S> k = make_key<S>(std::move(name), Kind::string, f);
  k.allowed = std::move(allowed);
  k.not_allowed = not_allowed;
  return k;
}
// A string key whose names are an enum class's (an unknown name: `not_allowed`).
template <class S, Choice E>
Key<S> choice(std::string name, E S::*f, Errc not_allowed = Errc::config_range) {
  ChoiceField<S> field{[f](const S& s) { return to_string(s.*f); },
                       [f](S& s, std::size_t index) { s.*f = static_cast<E>(index); }};
  Key<S> k = make_key<S>(std::move(name), Kind::string, std::move(field));
  k.allowed = choice_names<E>();
  k.not_allowed = not_allowed;
  return k;
}
template <class S>
Key<S> flag(std::string name, bool S::*f) {
  return make_key<S>(std::move(name), Kind::boolean, f);
}
template <class S, class Int>
Key<S> whole(std::string name, Int S::*f, std::int64_t lo, std::int64_t hi) {
  Key<S> k = make_key<S>(std::move(name), Kind::integer, f);
  k.lo = static_cast<double>(lo);
  k.hi = static_cast<double>(hi);
  return k;
}
template <class S>
Key<S> real(std::string name, double S::*f, double lo, double hi, bool lo_open = false) {
  Key<S> k = make_key<S>(std::move(name), Kind::number, f);
  k.lo = lo;
  k.hi = hi;
  k.lo_open = lo_open;
  return k;
}
template <class S>
Key<S> texts(std::string name, std::vector<std::string> S::*f, std::vector<std::string> allowed = {}) {
  Key<S> k = make_key<S>(std::move(name), Kind::strings, f);
  k.allowed = std::move(allowed);
  k.not_allowed = Errc::config_unknown_name;
  return k;
}
template <class S>
Key<S> subtable(std::string name) {
  return make_key<S>(std::move(name), Kind::table, std::monostate{});
}

// The sections. Integer bounds beyond int64 are held as doubles exactly
// enough for the ranges used here (all below 2^53 but the int64 maximum,
// which integer() reads back as such).
const std::vector<Key<RunConfig>>& run_keys();
const std::vector<Key<StopConfig>>& stop_keys();
const std::vector<Key<PolicyConfig>>& policy_keys();
const std::vector<Key<LoraConfig>>& lora_keys();
const std::vector<Key<LearnerConfig>>& learner_keys();
const std::vector<Key<ExplorerConfig>>& explorer_keys();
const std::vector<Key<WeightStoreConfig>>& weight_store_keys();
const std::vector<Key<RecordConfig>>& record_keys();
const std::vector<Key<ExternalEnvConfig>>& external_keys();
const std::vector<Key<LogConfig>>& log_keys();
const std::vector<Key<MetricsConfig>>& metrics_keys();
const std::vector<Key<AlertsConfig>>& alerts_keys();
const std::vector<Key<GatewayConfig>>& gateway_keys();
const std::vector<Key<LaunchConfig>>& launch_keys();
const std::vector<Key<RewardConfig>>& reward_keys();
const std::vector<Key<TokensConfig>>& tokens_keys();
const std::vector<Key<TlsConfig>>& tls_keys();
const std::vector<Key<AutoscaleConfig>>& autoscale_keys();
const std::vector<Key<NodeConfig>>& node_keys();

// Reads every declared key present in `r`'s table into `out` (absent keys
// keep their defaults) and refuses keys the section does not declare.
template <class S>
void read_section(config_detail::TableReader& r, const std::vector<Key<S>>& keys, S& out) {
  std::vector<std::string> names;
  for (const auto& k : keys) {
    names.push_back(k.name);
    std::visit(
        [&](auto field) {
          using F = decltype(field);
          if constexpr (std::is_same_v<F, std::monostate>) {
            (void)r.find(k.name);  // a sub-table: known here, read by its section's own code
          } else if constexpr (std::is_same_v<F, std::string S::*>) {
            r.string(k.name, out.*field, k.allowed, k.not_allowed);
          } else if constexpr (std::is_same_v<F, ChoiceField<S>>) {
            std::string name = field.get(out);
            r.string(k.name, name, k.allowed, k.not_allowed);
            const auto at = std::find(k.allowed.begin(), k.allowed.end(), name);
            if (at != k.allowed.end()) field.set(out, static_cast<std::size_t>(at - k.allowed.begin()));
          } else if constexpr (std::is_same_v<F, bool S::*>) {
            r.boolean(k.name, out.*field);
          } else if constexpr (std::is_same_v<F, double S::*>) {
            r.number(k.name, out.*field, k.lo, k.hi, k.lo_open);
          } else if constexpr (std::is_same_v<F, std::vector<std::string> S::*>) {
            r.strings(k.name, out.*field, k.allowed);
          } else {
            const auto hi = k.hi >= 9.2e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(k.hi);
            r.integer(k.name, out.*field, static_cast<std::int64_t>(k.lo), hi);
          }
        },
        k.field);
  }
  r.reject_unknown(names);
}

// The declared keys of `in` as a TOML table (sub-tables left to the caller).
template <class S>
toml::table write_section(const std::vector<Key<S>>& keys, const S& in) {
  toml::table t;
  for (const auto& k : keys)
    std::visit(
        [&](auto field) {
          using F = decltype(field);
          if constexpr (std::is_same_v<F, std::monostate>) {
          } else if constexpr (std::is_same_v<F, ChoiceField<S>>) {
            t.insert(k.name, field.get(in));
          } else if constexpr (std::is_same_v<F, std::vector<std::string> S::*>) {
            toml::array a;
            for (const auto& s : in.*field) a.push_back(s);
            t.insert(k.name, a);
          } else if constexpr (std::is_same_v<F, std::uint64_t S::*>) {
            t.insert(k.name, static_cast<std::int64_t>(in.*field));
          } else {
            t.insert(k.name, in.*field);
          }
        },
        k.field);
  return t;
}

// Every key of every section, for documentation checks: the section as
// docs/topology.md heads it ("run", "run.stop", "node"), the default as a
// TOML value under the key "v" (none for a sub-table).
struct KeyInfo {
  std::string section, name;
  Kind kind = Kind::string;
  toml::table default_value;
  std::vector<std::string> allowed;
  bool required = false;
};
std::vector<KeyInfo> all_keys();

}  // namespace rlx::config_keys
