#include "envs/tokens/token_tasks.hpp"

#include <algorithm>
#include <random>

#include "envs/code/code_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"

namespace rlx {

const std::vector<std::string>& token_task_kinds() {
  static const std::vector<std::string> kinds{"arithmetic", "code"};
  return kinds;
}

std::string scorer_for(std::string_view kind) {
  if (kind == "code" || kind == "workspace") return std::string(kind);
  return "arithmetic";
}

namespace {

TokenTask arithmetic_task(std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  std::uniform_int_distribution<int> operand(0, 49), op(0, 1);
  const int a = operand(rng), b = operand(rng);
  const bool plus = op(rng) == 0;
  TokenTask t;
  t.id = std::to_string(a) + (plus ? "+" : "-") + std::to_string(b);
  t.prompt = t.id + "=";
  t.reference = std::to_string(plus ? a + b : a - b);
  t.hint = t.id + "=" + t.reference + "\n";
  return t;
}

}  // namespace

Result<TokenTask> make_token_task(std::string_view kind, std::uint64_t seed) {
  if (kind == "arithmetic") return arithmetic_task(seed);
  if (kind != "code")
    return make_error(Errc::config_unknown_name, "unknown token task kind \"" + std::string(kind) +
                                                     "\" (arithmetic, code)");
  const auto& families = code_task_families();
  auto task = make_code_task(families[seed % families.size()], seed / families.size());
  if (!task) return task.error();
  TokenTask t;
  t.id = task->id;
  // The spec names the signature; one example pins the calling convention.
  const auto& ex = task->examples.front();
  t.prompt = task->spec + "\n" + example_line(task->function, ex);
  t.reference = task->reference;
  t.hint = example_line(task->function, task->examples.back());
  return t;
}

std::vector<std::int64_t> hinted_prompt(const std::vector<std::int64_t>& prompt, std::string_view hint,
                                        const Tokenizer& tokenizer) {
  const std::int64_t newline = tokenizer.encode("\n").front();
  const auto h = tokenizer.encode(hint);
  auto after = std::find(prompt.rbegin(), prompt.rend(), newline).base();  // prompt.begin() when none
  std::vector<std::int64_t> out(prompt.begin(), after);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), after, prompt.end());
  return out;
}

}  // namespace rlx
