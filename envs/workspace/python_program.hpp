// Small typed Python programs for workspace tasks (envs/workspace): an
// expression tree over integers, lists of integers and strings, generated
// from a grammar, printed as Python source and evaluated here with
// Python's semantics (floor division, modulo by a positive number,
// clamped slices, str.replace), so a task knows every expected value
// without running Python. Functions call functions defined before them.
// CAF-free, no LibTorch.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace rlx {

enum class PyType : std::uint8_t { integer, list, text };
const char* py_type_name(PyType t);  // "int", "list[int]", "str"

enum class PyOp : std::uint8_t {
  param, constant, item, call,                                          // leaves and calls
  add, sub, mul_k, floordiv_k, mod_k, max2, min2, abs1, len_list, sum_list, len_text, count_k, first_or_k,  // -> int
  map, filter, sorted, reversed, take_k, drop_k, append,               // -> list
  upper, lower, reverse_text, replace_k, concat, repeat_k, str_of, join_k, take_text_k,  // -> str
};
constexpr int kPyOps = static_cast<int>(PyOp::take_text_k) + 1;
const char* py_op_name(PyOp op);

// Filter conditions on the item x: x % k == r, x > k, x < k, x != k.
enum class PyCond : std::uint8_t { mod_eq, greater, less, not_equal };

struct PyExpr {
  PyOp op = PyOp::constant;
  PyType type = PyType::integer;
  std::int64_t k = 0, r = 0;      // constants of the op (a divisor, a bound, a remainder)
  std::string a, b;               // text constants (replace a by b; a join separator; a counted letter)
  PyCond cond = PyCond::greater;
  int index = -1;                 // param: its position; call: the callee's index in the project
  std::vector<PyExpr> kids;
};

struct PyFunction {
  std::string name;
  std::vector<std::string> params;
  std::vector<PyType> param_types;
  PyType returns = PyType::integer;
  PyExpr body;
  std::string module;             // the module it lives in ("shapes")
};

using PyValue = std::variant<std::int64_t, std::vector<std::int64_t>, std::string>;

// What a generator may use: constants and operations. Two disjoint
// vocabularies make training and held-out programs differ by construction.
struct PyVocabulary {
  std::vector<std::int64_t> constants;   // bounds, divisors (those > 1), multipliers, repeats
  std::vector<std::string> letters;      // counted and replaced letters, join separators
  std::set<PyOp> ops;                    // the operations it may draw
};

// A random expression of `type` over `fn`'s params, calling any of
// `callable` (functions defined before it), at most `depth` deep.
PyExpr random_expr(PyType type, int depth, const PyFunction& fn, const std::vector<PyFunction>& callable,
                   const PyVocabulary& vocab, std::mt19937_64& rng);

// Evaluates `e` with `args` (and the loop item `item`) in `project`.
PyValue evaluate(const PyExpr& e, const std::vector<PyValue>& args, const std::vector<PyFunction>& project,
                 std::int64_t item = 0);
PyValue call_function(const PyFunction& f, const std::vector<PyValue>& args, const std::vector<PyFunction>& project);

// Python source.
std::string python_expr(const PyExpr& e, const PyFunction& fn, const std::vector<PyFunction>& project);
std::string python_value(const PyValue& v);
// What `e` computes, in words (a docstring's specification): each
// operation as an English phrase over its operands, a compound operand in
// parentheses, parameters and callees by name, constants as written
// ("the first 3 items of (xs sorted in ascending order)").
std::string describe_expr(const PyExpr& e, const PyFunction& fn, const std::vector<PyFunction>& project);
// The body's shape: its operations in pre-order ("sum_list(filter(param))"),
// constants and names left out.
std::string expr_shape(const PyExpr& e);

// Random arguments for `types` (small integers, short lists and strings over "abcde").
std::vector<PyValue> random_args(const std::vector<PyType>& types, std::mt19937_64& rng);

}  // namespace rlx
