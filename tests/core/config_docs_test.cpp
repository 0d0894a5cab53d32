// docs/topology.md against the keys the code declares (core/config_keys.hpp):
// every key documented in its section with its type, its allowed values
// and its default; no documented key the code does not know.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/config.hpp"
#include "core/config_keys.hpp"
#include "envs/env.hpp"

using namespace rlx;
using config_keys::Kind;

namespace {

struct DocRow {
  std::string type, default_cell, whole;
};

// The cells of a Markdown table row, split at the '|' not escaped as '\|'.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  for (auto& c : out) {
    const auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
    c = b == std::string::npos ? "" : c.substr(b, e - b + 1);
  }
  return out;
}

// section -> key -> its row, from the "## [section]" tables of the file.
std::map<std::string, std::map<std::string, DocRow>> documented(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::map<std::string, std::map<std::string, DocRow>> out;
  std::string section, line;
  while (std::getline(in, line)) {
    if (line.rfind("## [", 0) == 0 || line.rfind("### [", 0) == 0) {
      const auto open = line.find('[');
      const auto close = line.find(']');
      section = line.substr(open + 1, close - open - 1);
      if (!section.empty() && section.front() == '[') section = section.substr(1);  // [[node]]
      continue;
    }
    if (line.rfind("## ", 0) == 0) section.clear();
    if (section.empty() || line.rfind("| `", 0) != 0) continue;
    const auto c = cells(line);
    if (c.size() < 3) continue;
    const std::string key = c[0].substr(1, c[0].find('`', 1) - 1);
    out[section][key] = DocRow{c[1], c[2], line};
  }
  return out;
}

const char* kind_word(Kind k) {
  switch (k) {
    case Kind::string: return "string";
    case Kind::boolean: return "bool";
    case Kind::integer: return "integer";
    case Kind::number: return "number";
    case Kind::strings: return "array of strings";
    case Kind::table: return "table";
  }
  return "?";
}

// Whether a documented default (a TOML literal in backticks) is the code's.
bool same_default(const std::string& cell, const toml::table& code, std::string& why) {
  if (cell.size() < 2 || cell.front() != '`' || cell.back() != '`') {
    why = "the default is not a TOML value in backticks";
    return false;
  }
  toml::table doc;
  try {
    doc = toml::parse("v = " + cell.substr(1, cell.size() - 2));
  } catch (const toml::parse_error& e) {
    why = std::string("the default does not parse: ") + std::string(e.description());
    return false;
  }
  const toml::node* d = doc.get("v");
  const toml::node* c = code.get("v");
  std::ostringstream shown;
  shown << code;  // v = <the default>
  why = "the code's " + shown.str();
  if (c->is_number() && d->is_number()) return c->value<double>() == d->value<double>();
  if (c->is_array() && d->is_array()) {  // arrays of strings, element by element
    const auto &ca = *c->as_array(), &da = *d->as_array();
    if (ca.size() != da.size()) return false;
    for (std::size_t i = 0; i < ca.size(); ++i)
      if (!ca[i].is_string() || ca[i].value<std::string>() != da[i].value<std::string>()) return false;
    return true;
  }
  if (c->type() != d->type()) return false;
  if (c->is_string()) return *c->value<std::string>() == *d->value<std::string>();
  if (c->is_boolean()) return *c->value<bool>() == *d->value<bool>();
  return false;
}

}  // namespace

TEST_CASE("docs/topology.md documents every key of every section with its type, allowed values and default",
          "[core][config][docs]") {
  const auto docs = documented(std::string(RLX_SOURCE_DIR) + "/docs/topology.md");
  const auto keys = config_keys::all_keys();
  REQUIRE(keys.size() >= 100);  // the sections are all there
  for (const auto& k : keys) {
    INFO("[" << k.section << "] " << k.name);
    auto section = docs.find(k.section);
    REQUIRE(section != docs.end());
    auto row = section->second.find(k.name);
    REQUIRE(row != section->second.end());  // the key is documented
    const auto& r = row->second;
    INFO("row: " << r.whole);
    if (k.allowed.empty() || k.kind == Kind::strings) CHECK(r.type.find(kind_word(k.kind)) != std::string::npos);
    for (const auto& v : k.allowed) CHECK(r.whole.find(v) != std::string::npos);  // each allowed value named
    if (k.kind == Kind::table || k.required) continue;
    std::string why;
    CHECK(same_default(r.default_cell, k.default_value, why));
    INFO(why);
  }
}

TEST_CASE("docs/topology.md documents no key the code does not declare", "[core][config][docs]") {
  const auto docs = documented(std::string(RLX_SOURCE_DIR) + "/docs/topology.md");
  std::map<std::string, std::set<std::string>> declared;
  for (const auto& k : config_keys::all_keys()) declared[k.section].insert(k.name);
  for (const auto& [section, rows] : docs) {
    INFO("[" << section << "]");
    REQUIRE(declared.count(section));
    for (const auto& [key, row] : rows) {
      INFO(key);
      CHECK(declared[section].count(key));
    }
  }
}

TEST_CASE("every example topology in examples/ is a valid config", "[config][docs]") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(RLX_SOURCE_DIR "/examples")) {
    if (e.path().extension() != ".toml") continue;
    auto c = load_config(e.path().string(), builtin_envs().names());
    INFO(e.path().string() << ": " << (c ? std::string() : c.error().message));
    CHECK(c.ok());
    ++n;
  }
  CHECK(n >= 8);
}
