// Reading one TOML table of a topology file: typed values checked
// against their range or allowed names, every failure an Error that names
// the file, line, column, key and value, and the keys no reader asked for
// reported (usually typos). Private to core/ (config.cpp, config_keys.cpp).
#pragma once

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace rlx::config_detail {

// Thrown inside the parser only; parse_config turns it into an Error.
struct ConfigFailure {
  Error error;
};

inline std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

inline std::string show(const toml::node& n) {
  std::ostringstream os;
  if (n.is_string())
    os << '"' << *n.value<std::string>() << '"';
  else if (n.is_array() || n.is_table())
    os << (n.is_array() ? "an array" : "a table");
  else
    n.visit([&](auto&& v) { os << v; });
  return os.str();
}

inline const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

// Reads the keys of one table, remembering which it consumed so unknown
// keys (usually typos) are reported.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix, std::string_view source)
      : table_(table), prefix_(std::move(prefix)), source_(source) {}

  [[noreturn]] void fail(Errc code, const toml::node* at, const std::string& key,
                         const std::string& what) const {
    // A rule about one key of a table, given the table: point at the key
    // itself when it is there (its position and value, not "a table").
    if (at && at->is_table())
      if (const auto dot = key.rfind('.'); dot != std::string::npos)
        if (const toml::node* leaf = at->as_table()->get(key.substr(dot + 1))) at = leaf;
    const auto& src = at ? at->source() : table_.source();
    std::ostringstream os;
    if (src.path && src.path->starts_with("--set "))  // a value given on the command line
      os << *src.path << ": key '" << qualified(key) << "'";
    else
      os << source_ << ":" << src.begin.line << ":" << src.begin.column << ": key '" << qualified(key) << "'";
    if (at && code != Errc::config_unknown_key) os << " = " << show(*at);
    os << ": " << what;
    throw ConfigFailure{make_error(code, os.str())};
  }

  std::string qualified(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const toml::node* find(const std::string& key) {
    seen_.insert(key);
    return table_.get(key);
  }

  void string(const std::string& key, std::string& out, const std::vector<std::string>& allowed = {},
              Errc unknown = Errc::config_range) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_string()) fail(Errc::config_type, n, key, std::string("expected a string, got ") + type_name(*n));
    std::string v = *n->value<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end())
      fail(unknown, n, key, "allowed: " + join(allowed));
    out = v;
  }

  void boolean(const std::string& key, bool& out) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_boolean()) fail(Errc::config_type, n, key, std::string("expected a boolean, got ") + type_name(*n));
    out = *n->value<bool>();
  }

  template <class Int>
  void integer(const std::string& key, Int& out, std::int64_t lo, std::int64_t hi) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_integer()) fail(Errc::config_type, n, key, std::string("expected an integer, got ") + type_name(*n));
    std::int64_t v = *n->value<std::int64_t>();
    if (v < lo || v > hi)
      fail(Errc::config_range, n, key, "allowed: integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<Int>(v);
  }

  // A number in [lo, hi] (or (lo, hi] when `lo_open`); integers are accepted.
  void number(const std::string& key, double& out, double lo, double hi, bool lo_open = false) {
    const toml::node* n = find(key);
    if (!n) return;
    if (!n->is_number()) fail(Errc::config_type, n, key, std::string("expected a number, got ") + type_name(*n));
    double v = n->is_integer() ? static_cast<double>(*n->value<std::int64_t>()) : *n->value<double>();
    bool below = lo_open ? v <= lo : v < lo;
    if (below || v > hi || v != v) {
      std::ostringstream os;
      os << "allowed: numbers in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
      fail(Errc::config_range, n, key, os.str());
    }
    out = v;
  }

  void strings(const std::string& key, std::vector<std::string>& out, const std::vector<std::string>& allowed) {
    const toml::node* n = find(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) fail(Errc::config_type, n, key, std::string("expected an array of strings, got ") + type_name(*n));
    out.clear();
    for (const auto& item : *a) {
      if (!item.is_string()) fail(Errc::config_type, &item, key, "expected an array of strings");
      std::string v = *item.value<std::string>();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end())
        fail(Errc::config_unknown_name, &item, key, "allowed: " + join(allowed));
      out.push_back(v);
    }
  }

  const toml::table* table(const std::string& key) {
    const toml::node* n = find(key);
    if (!n) return nullptr;
    if (!n->is_table()) fail(Errc::config_type, n, key, std::string("expected a table, got ") + type_name(*n));
    return n->as_table();
  }

  // Reports the first key that no reader asked for.
  void reject_unknown(const std::vector<std::string>& known_hint) const {
    for (const auto& [k, v] : table_) {
      std::string key(k.str());
      if (!seen_.count(key)) {
        std::vector<std::string> sorted(known_hint);
        fail(Errc::config_unknown_key, &v, key, "unknown key; known keys here: " + join(sorted));
      }
    }
  }

  const std::set<std::string>& seen() const { return seen_; }

 private:
  const toml::table& table_;
  std::string prefix_;
  std::string_view source_;
  std::set<std::string> seen_;
};

}  // namespace rlx::config_detail
