// The RLX error policy (see STYLE.md): expected failures are values of
// `rlx::Error`, named by `rlx::Errc`; broken invariants go through
// RLX_REQUIRE, which throws `rlx::InvariantError` with the values printed.
// This header is plain C++ so compute code can use it without CAF.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace rlx {

// Every named failure of RLX. Values are stable (they appear in logs and
// metrics); append only.
enum class Errc : std::uint8_t {
  ok = 0,
  // Wire decoding (messages/codec):
  truncated_message,      // fewer bytes than the Cap'n Proto framing claims
  malformed_message,      // bytes that are not a valid Cap'n Proto message
  message_too_large,      // traversal limit exceeded (amplification, huge lists)
  message_too_deep,       // nesting limit exceeded
  wrong_message_type,     // a valid Envelope whose body is not the expected kind
  unsupported_schema,     // schemaVersion newer than this build understands
  invalid_field,          // decodes, but a field breaks the contract (shape, dtype, range)
  corrupt_record,         // a stored record whose checksum does not match its contents
  // Configuration (core/config):
  config_parse,           // TOML syntax error
  config_type,            // a key holds a value of the wrong type
  config_unknown_key,     // a key that RLX does not know (typos)
  config_range,           // a number outside its allowed range
  config_unknown_name,    // an env/policy/algorithm name not in its registry
  config_missing,         // a required key is absent
  // Runtime:
  stale_segment,          // lag > max_staleness at admission
  timeout,                // a request got no answer in time
  not_found,              // asked for something not held (e.g. an evicted weight version)
  io,                     // filesystem or process failure
  group_broken,           // the data-parallel learner group cannot go on (a rank died, hung or failed an update)
  refused,                // the peer refused the request (a wrong secret, another run, a name taken)
  env_failed,             // an environment failed to reset or step (an external env process died or broke protocol)
  busy,                   // too much work already waits (the gateway's queue): ask again later
};

// Name of an error code, as used in logs and metrics ("malformed_message").
const char* to_string(Errc code);

// An expected failure: a code and a message for humans.
struct Error {
  Errc code = Errc::ok;
  std::string message;
};

// A value or an Error. Small on purpose: C++20 has no std::expected.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success with nothing to carry, or an Error: `return {};` on success.
template <>
class Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

inline Error make_error(Errc code, std::string message) { return Error{code, std::move(message)}; }

// Thrown by RLX_REQUIRE: a bug, not bad input.
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
inline void append_values(std::ostringstream&) {}
template <class T, class... Ts>
void append_values(std::ostringstream& os, const T& x, const Ts&... xs) {
  os << " [" << x << "]";
  append_values(os, xs...);
}
template <class... Ts>
[[noreturn]] void require_failed(const char* cond, const char* file, int line, const Ts&... xs) {
  std::ostringstream os;
  os << file << ":" << line << ": requirement failed: " << cond;
  append_values(os, xs...);
  throw InvariantError(os.str());
}
}  // namespace detail

}  // namespace rlx

// Checks an invariant; on failure throws rlx::InvariantError naming the
// condition and printing the given values, like KJ_REQUIRE.
#define RLX_REQUIRE(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond)) ::rlx::detail::require_failed(#cond, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
  } while (false)
