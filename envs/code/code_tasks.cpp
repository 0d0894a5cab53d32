#include "envs/code/code_tasks.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <numeric>
#include <random>

namespace rlx {

namespace {

using Rng = std::mt19937_64;

std::int64_t uniform(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::string json_list(const std::vector<std::int64_t>& xs) {
  std::string out = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) out += (i ? "," : "") + std::to_string(xs[i]);
  return out + "]";
}

std::vector<std::int64_t> random_list(Rng& rng, std::size_t min_len, std::size_t max_len, std::int64_t lo,
                                      std::int64_t hi) {
  std::vector<std::int64_t> xs(static_cast<std::size_t>(uniform(rng, static_cast<std::int64_t>(min_len),
                                                                static_cast<std::int64_t>(max_len))));
  for (auto& x : xs) x = uniform(rng, lo, hi);
  return xs;
}

std::string random_word(Rng& rng, std::size_t max_len) {
  std::string s(static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(max_len))), 'a');
  for (auto& c : s) c = static_cast<char>('a' + uniform(rng, 0, 25));
  return s;
}

// One family: fills spec and reference for its parameters, and makes test
// number i (the arguments and the answer, as JSON). Tests 0 and 1 are the
// visible examples; hidden tests are 2.. with edge cases first.
struct Family {
  std::function<void(Rng&, CodeTask&, std::vector<std::int64_t>& params)> setup;
  std::function<ProgramTest(Rng&, const std::vector<std::int64_t>& params, int i)> test;
};

const std::map<std::string, Family, std::less<>>& families() {
  static const std::map<std::string, Family, std::less<>> f{
      {"add_k",
       {[](Rng& rng, CodeTask& t, std::vector<std::int64_t>& p) {
          p = {uniform(rng, -20, 20)};
          t.spec = "def solve(x: int) -> int: return x plus " + std::to_string(p[0]) + ".";
          t.reference = "def solve(x):\n    return x + (" + std::to_string(p[0]) + ")\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>& p, int i) {
          const std::int64_t x = i == 2 ? 0 : uniform(rng, -1000, 1000);
          return ProgramTest{"[" + std::to_string(x) + "]", std::to_string(x + p[0])};
        }}},
      {"scale_k",
       {[](Rng& rng, CodeTask& t, std::vector<std::int64_t>& p) {
          p = {uniform(rng, 2, 9)};
          t.spec = "def solve(x: int) -> int: return x times " + std::to_string(p[0]) + ".";
          t.reference = "def solve(x):\n    return x * " + std::to_string(p[0]) + "\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>& p, int i) {
          const std::int64_t x = i == 2 ? 0 : i == 3 ? -1 : uniform(rng, -1000, 1000);
          return ProgramTest{"[" + std::to_string(x) + "]", std::to_string(x * p[0])};
        }}},
      {"clamp",
       {[](Rng& rng, CodeTask& t, std::vector<std::int64_t>& p) {
          const std::int64_t lo = uniform(rng, -50, 0), hi = uniform(rng, 1, 50);
          p = {lo, hi};
          t.spec = "def solve(x: int) -> int: return x limited to the range [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "].";
          t.reference = "def solve(x):\n    return min(max(x, " + std::to_string(lo) + "), " + std::to_string(hi) + ")\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>& p, int i) {
          const std::int64_t x = i == 2 ? p[0] - 1 : i == 3 ? p[1] + 1 : i == 4 ? p[0] : uniform(rng, -100, 100);
          return ProgramTest{"[" + std::to_string(x) + "]", std::to_string(std::clamp(x, p[0], p[1]))};
        }}},
      {"sum_list",
       {[](Rng&, CodeTask& t, std::vector<std::int64_t>&) {
          t.spec = "def solve(xs: list[int]) -> int: return the sum of xs (0 for an empty list).";
          t.reference = "def solve(xs):\n    return sum(xs)\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>&, int i) {
          const auto xs = i == 2 ? std::vector<std::int64_t>{} : random_list(rng, 1, 8, -100, 100);
          return ProgramTest{"[" + json_list(xs) + "]", std::to_string(std::accumulate(xs.begin(), xs.end(), std::int64_t{0}))};
        }}},
      {"max_list",
       {[](Rng&, CodeTask& t, std::vector<std::int64_t>&) {
          t.spec = "def solve(xs: list[int]) -> int: return the largest element of xs (never empty).";
          t.reference = "def solve(xs):\n    return max(xs)\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>&, int i) {
          auto xs = random_list(rng, 1, 8, -100, 100);
          if (i == 2) xs = {uniform(rng, -100, -1)};                               // one negative element
          if (i == 3) std::fill(xs.begin(), xs.end(), uniform(rng, -100, -1));     // all equal, negative
          return ProgramTest{"[" + json_list(xs) + "]", std::to_string(*std::max_element(xs.begin(), xs.end()))};
        }}},
      {"count_k",
       {[](Rng& rng, CodeTask& t, std::vector<std::int64_t>& p) {
          p = {uniform(rng, 0, 5)};
          t.spec = "def solve(xs: list[int]) -> int: return how many elements of xs equal " + std::to_string(p[0]) + ".";
          t.reference = "def solve(xs):\n    return xs.count(" + std::to_string(p[0]) + ")\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>& p, int i) {
          const auto xs = i == 2 ? std::vector<std::int64_t>{} : random_list(rng, 1, 10, 0, 5);
          return ProgramTest{"[" + json_list(xs) + "]", std::to_string(std::count(xs.begin(), xs.end(), p[0]))};
        }}},
      {"reverse_string",
       {[](Rng&, CodeTask& t, std::vector<std::int64_t>&) {
          t.spec = "def solve(s: str) -> str: return s reversed.";
          t.reference = "def solve(s):\n    return s[::-1]\n";
        },
        [](Rng& rng, const std::vector<std::int64_t>&, int i) {
          const std::string s = i == 2 ? "" : random_word(rng, 10);  // lowercase letters: no JSON escapes
          return ProgramTest{"[\"" + s + "\"]", "\"" + std::string(s.rbegin(), s.rend()) + "\""};
        }}},
  };
  return f;
}

constexpr int kExamples = 2;
constexpr int kHidden = 8;

}  // namespace

const std::vector<std::string>& code_task_families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, f] : families()) n.push_back(name);
    return n;
  }();
  return names;
}

Result<CodeTask> make_code_task(std::string_view family, std::uint64_t seed) {
  auto it = families().find(family);
  if (it == families().end()) return make_error(Errc::config_unknown_name, "no code task family '" + std::string(family) + "'");
  // The family's name enters the seed (FNV-1a: the same on every build),
  // so task 7 of two families differ.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : family) h = (h ^ c) * 0x100000001b3ULL;
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + h);
  CodeTask t;
  t.id = std::string(family) + ":" + std::to_string(seed);
  std::vector<std::int64_t> params;
  it->second.setup(rng, t, params);
  for (int i = 0; i < kExamples + kHidden; ++i) {
    // Examples are ordinary cases; the edge cases (test numbers 2, 3, 4) are hidden.
    ProgramTest test = it->second.test(rng, params, i < kExamples ? 100 : i);
    (i < kExamples ? t.examples : t.hidden).push_back(std::move(test));
  }
  return t;
}

Result<CodeTask> code_task(std::string_view id) {
  const auto colon = id.rfind(':');
  std::uint64_t seed = 0;
  if (colon == std::string_view::npos || colon == 0) return make_error(Errc::invalid_field, "a code task id is FAMILY:SEED");
  const auto digits = id.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
    return make_error(Errc::invalid_field, "a code task id is FAMILY:SEED, with SEED a number");
  auto task = make_code_task(id.substr(0, colon), seed);
  if (!task) return make_error(Errc::invalid_field, task.error().message);
  return task;
}

}  // namespace rlx
