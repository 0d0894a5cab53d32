// Integers read from JSON that someone else wrote (a tokenizer.json, a
// config.json, a request body). nlohmann's get<std::int64_t>() casts whatever
// number it finds, and a float such as 2e57 cast to an integer is undefined
// behaviour; value(key, 1) does the same. These read an integer only when the
// JSON holds an integer that fits.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

namespace rlx {

// The value as a 64-bit signed integer, or nothing when it is not an integer
// (a float, a string, null...) or is past INT64_MAX.
inline std::optional<std::int64_t> json_int64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

}  // namespace rlx
