#include "envs/workspace/python_program.hpp"
#include "envs/workspace/python_source.hpp"

#include <algorithm>
#include <stdexcept>

namespace rlx {

namespace {

constexpr const char* kOpNames[kPyOps] = {
    "param", "constant", "item", "call", "add", "sub", "mul_k", "floordiv_k", "mod_k", "max2", "min2", "abs1",
    "len_list", "sum_list", "len_text", "count_k", "first_or_k", "map", "filter", "sorted", "reversed", "take_k",
    "drop_k", "append", "upper", "lower", "reverse_text", "replace_k", "concat", "repeat_k", "str_of", "join_k",
    "take_text_k"};

PyType result_type(PyOp op) {
  switch (op) {
    case PyOp::add: case PyOp::sub: case PyOp::mul_k: case PyOp::floordiv_k: case PyOp::mod_k: case PyOp::max2:
    case PyOp::min2: case PyOp::abs1: case PyOp::len_list: case PyOp::sum_list: case PyOp::len_text:
    case PyOp::count_k: case PyOp::first_or_k: case PyOp::item:
      return PyType::integer;
    case PyOp::map: case PyOp::filter: case PyOp::sorted: case PyOp::reversed: case PyOp::take_k: case PyOp::drop_k:
    case PyOp::append:
      return PyType::list;
    default:
      return PyType::text;
  }
}

std::int64_t pick(const std::vector<std::int64_t>& v, std::mt19937_64& rng) { return v[rng() % v.size()]; }
std::string pick(const std::vector<std::string>& v, std::mt19937_64& rng) { return v[rng() % v.size()]; }

// A constant > 1 (a divisor or a modulus).
std::int64_t divisor(const PyVocabulary& vocab, std::mt19937_64& rng) {
  std::vector<std::int64_t> d;
  for (auto k : vocab.constants)
    if (k > 1) d.push_back(k);
  return d.empty() ? 2 : pick(d, rng);
}

PyExpr leaf_constant(PyType type, const PyVocabulary& vocab, std::mt19937_64& rng) {
  PyExpr e;
  e.op = PyOp::constant;
  e.type = type;
  if (type == PyType::text)
    e.a = pick(vocab.letters, rng) + pick(vocab.letters, rng);
  else
    e.k = pick(vocab.constants, rng);
  return e;
}

// The expression inside a comprehension: one operation on the item x.
PyExpr item_expr(const PyVocabulary& vocab, std::mt19937_64& rng) {
  static const PyOp kItemOps[] = {PyOp::add, PyOp::sub, PyOp::mul_k, PyOp::floordiv_k, PyOp::mod_k,
                                  PyOp::max2, PyOp::min2, PyOp::abs1};
  std::vector<PyOp> ops;
  for (auto op : kItemOps)
    if (vocab.ops.count(op)) ops.push_back(op);
  PyExpr x;
  x.op = PyOp::item;
  if (ops.empty()) return x;
  PyExpr e;
  e.op = ops[rng() % ops.size()];
  e.type = PyType::integer;
  e.kids.push_back(x);
  if (e.op == PyOp::mul_k || e.op == PyOp::floordiv_k || e.op == PyOp::mod_k)
    e.k = e.op == PyOp::mul_k ? pick(vocab.constants, rng) : divisor(vocab, rng);
  else if (e.op != PyOp::abs1)
    e.kids.push_back(leaf_constant(PyType::integer, vocab, rng));
  return e;
}

}  // namespace

const char* py_type_name(PyType t) {
  switch (t) {
    case PyType::integer: return "int";
    case PyType::list: return "list[int]";
    case PyType::text: return "str";
  }
  return "?";
}

const char* py_op_name(PyOp op) { return kOpNames[static_cast<int>(op)]; }

PyExpr random_expr(PyType type, int depth, const PyFunction& fn, const std::vector<PyFunction>& callable,
                   const PyVocabulary& vocab, std::mt19937_64& rng) {
  std::vector<int> params;
  for (std::size_t i = 0; i < fn.param_types.size(); ++i)
    if (fn.param_types[i] == type) params.push_back(static_cast<int>(i));
  const bool leaf_ok = !params.empty() || type != PyType::list;
  if (depth <= 0 && leaf_ok) {
    if (!params.empty() && (type == PyType::list || rng() % 3 != 0)) {
      PyExpr e;
      e.op = PyOp::param;
      e.type = type;
      e.index = params[rng() % params.size()];
      return e;
    }
    return leaf_constant(type, vocab, rng);
  }
  // A list argument can only come from a list parameter (there are no list literals).
  const bool any_list = std::count(fn.param_types.begin(), fn.param_types.end(), PyType::list) > 0;
  std::vector<int> calls;
  for (std::size_t i = 0; i < callable.size(); ++i) {
    const auto& c = callable[i];
    const bool needs_list = std::count(c.param_types.begin(), c.param_types.end(), PyType::list) > 0;
    if (c.returns == type && (any_list || !needs_list)) calls.push_back(static_cast<int>(i));
  }
  std::vector<PyOp> ops;
  for (auto op : vocab.ops)
    if (op >= PyOp::add && result_type(op) == type) ops.push_back(op);  // leaves and calls are drawn above
  // Operations on a list need one to be reachable.
  std::erase_if(ops, [&](PyOp op) {
    switch (op) {
      case PyOp::len_list: case PyOp::sum_list: case PyOp::first_or_k: case PyOp::map: case PyOp::filter:
      case PyOp::sorted: case PyOp::reversed: case PyOp::take_k: case PyOp::drop_k: case PyOp::append:
      case PyOp::join_k:
        return !any_list;
      default:
        return false;
    }
  });
  if (!calls.empty() && rng() % 4 == 0) {
    PyExpr e;
    e.op = PyOp::call;
    e.index = calls[rng() % calls.size()];
    const auto& callee = callable[static_cast<std::size_t>(e.index)];
    e.type = callee.returns;
    for (auto t : callee.param_types) e.kids.push_back(random_expr(t, depth - 1, fn, callable, vocab, rng));
    return e;
  }
  if (ops.empty() || (leaf_ok && depth <= 1 && rng() % 3 == 0))
    return random_expr(type, 0, fn, callable, vocab, rng);
  PyExpr e;
  e.op = ops[rng() % ops.size()];
  e.type = type;
  const auto sub = [&](PyType t) { e.kids.push_back(random_expr(t, depth - 1, fn, callable, vocab, rng)); };
  switch (e.op) {
    case PyOp::add: case PyOp::sub: case PyOp::max2: case PyOp::min2:
      sub(PyType::integer);
      sub(PyType::integer);
      break;
    case PyOp::mul_k: e.k = pick(vocab.constants, rng); sub(PyType::integer); break;
    case PyOp::floordiv_k: case PyOp::mod_k: e.k = divisor(vocab, rng); sub(PyType::integer); break;
    case PyOp::abs1: case PyOp::str_of: sub(PyType::integer); break;
    case PyOp::len_list: case PyOp::sum_list: case PyOp::sorted: case PyOp::reversed: sub(PyType::list); break;
    case PyOp::first_or_k: e.k = pick(vocab.constants, rng); sub(PyType::list); break;
    case PyOp::take_k: case PyOp::drop_k: e.k = pick(vocab.constants, rng) % 5; sub(PyType::list); break;
    case PyOp::append: sub(PyType::list); sub(PyType::integer); break;
    case PyOp::map:
      sub(PyType::list);
      e.kids.push_back(item_expr(vocab, rng));
      break;
    case PyOp::filter:
      sub(PyType::list);
      e.cond = static_cast<PyCond>(rng() % 4);
      e.k = e.cond == PyCond::mod_eq ? divisor(vocab, rng) : pick(vocab.constants, rng);
      e.r = e.cond == PyCond::mod_eq ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(e.k)) : 0;
      break;
    case PyOp::len_text: case PyOp::upper: case PyOp::lower: case PyOp::reverse_text: sub(PyType::text); break;
    case PyOp::count_k: e.a = pick(vocab.letters, rng); sub(PyType::text); break;
    case PyOp::replace_k:
      // Never a letter by itself: that body is its text unchanged.
      e.a = pick(vocab.letters, rng);
      do e.b = pick(vocab.letters, rng);
      while (e.b == e.a);
      sub(PyType::text);
      break;
    case PyOp::concat: sub(PyType::text); sub(PyType::text); break;
    case PyOp::repeat_k: e.k = pick(vocab.constants, rng) % 3; sub(PyType::text); break;
    case PyOp::take_text_k: e.k = pick(vocab.constants, rng) % 6; sub(PyType::text); break;
    case PyOp::join_k: e.a = pick(vocab.letters, rng); sub(PyType::list); break;
    default: break;
  }
  return e;
}

namespace {

// By value: a range-for over as_list(kid(0)) keeps what it iterates alive.
std::int64_t as_int(const PyValue& v) { return std::get<std::int64_t>(v); }
std::vector<std::int64_t> as_list(PyValue v) { return std::get<std::vector<std::int64_t>>(std::move(v)); }
std::string as_text(PyValue v) { return std::get<std::string>(std::move(v)); }

std::int64_t floor_div(std::int64_t a, std::int64_t k) {
  std::int64_t q = a / k;
  if (a % k != 0 && ((a < 0) != (k < 0))) --q;
  return q;
}
std::int64_t py_mod(std::int64_t a, std::int64_t k) { return a - floor_div(a, k) * k; }

bool holds(const PyExpr& e, std::int64_t x) {
  switch (e.cond) {
    case PyCond::mod_eq: return py_mod(x, e.k) == e.r;
    case PyCond::greater: return x > e.k;
    case PyCond::less: return x < e.k;
    case PyCond::not_equal: return x != e.k;
  }
  return false;
}

}  // namespace

PyValue call_function(const PyFunction& f, const std::vector<PyValue>& args, const std::vector<PyFunction>& project) {
  return evaluate(f.body, args, project);
}

PyValue evaluate(const PyExpr& e, const std::vector<PyValue>& args, const std::vector<PyFunction>& project,
                 std::int64_t item) {
  const auto kid = [&](std::size_t i) { return evaluate(e.kids[i], args, project, item); };
  switch (e.op) {
    case PyOp::param: return args.at(static_cast<std::size_t>(e.index));
    case PyOp::constant: return e.type == PyType::text ? PyValue(e.a) : PyValue(e.k);
    case PyOp::item: return item;
    case PyOp::call: {
      std::vector<PyValue> a;
      for (std::size_t i = 0; i < e.kids.size(); ++i) a.push_back(kid(i));
      return call_function(project.at(static_cast<std::size_t>(e.index)), a, project);
    }
    case PyOp::add: return as_int(kid(0)) + as_int(kid(1));
    case PyOp::sub: return as_int(kid(0)) - as_int(kid(1));
    case PyOp::mul_k: return as_int(kid(0)) * e.k;
    case PyOp::floordiv_k: return floor_div(as_int(kid(0)), e.k);
    case PyOp::mod_k: return py_mod(as_int(kid(0)), e.k);
    case PyOp::max2: return std::max(as_int(kid(0)), as_int(kid(1)));
    case PyOp::min2: return std::min(as_int(kid(0)), as_int(kid(1)));
    case PyOp::abs1: { const auto v = as_int(kid(0)); return v < 0 ? -v : v; }
    case PyOp::len_list: return static_cast<std::int64_t>(as_list(kid(0)).size());
    case PyOp::sum_list: { std::int64_t s = 0; for (auto v : as_list(kid(0))) s += v; return s; }
    case PyOp::len_text: return static_cast<std::int64_t>(as_text(kid(0)).size());
    case PyOp::count_k: {
      const auto s = as_text(kid(0));
      std::int64_t n = 0;
      for (std::size_t at = s.find(e.a); at != std::string::npos; at = s.find(e.a, at + e.a.size())) ++n;
      return n;
    }
    case PyOp::first_or_k: { const auto l = as_list(kid(0)); return l.empty() ? e.k : l.front(); }
    case PyOp::map: {
      std::vector<std::int64_t> out;
      for (auto x : as_list(kid(0))) out.push_back(as_int(evaluate(e.kids[1], args, project, x)));
      return out;
    }
    case PyOp::filter: {
      std::vector<std::int64_t> out;
      for (auto x : as_list(kid(0)))
        if (holds(e, x)) out.push_back(x);
      return out;
    }
    case PyOp::sorted: { auto l = as_list(kid(0)); std::sort(l.begin(), l.end()); return l; }
    case PyOp::reversed: { auto l = as_list(kid(0)); std::reverse(l.begin(), l.end()); return l; }
    case PyOp::take_k: {
      auto l = as_list(kid(0));
      l.resize(std::min<std::size_t>(l.size(), static_cast<std::size_t>(e.k)));
      return l;
    }
    case PyOp::drop_k: {
      const auto l = as_list(kid(0));
      return std::vector<std::int64_t>(l.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(l.size(), static_cast<std::size_t>(e.k))), l.end());
    }
    case PyOp::append: { auto l = as_list(kid(0)); l.push_back(as_int(kid(1))); return l; }
    case PyOp::upper: {
      auto s = as_text(kid(0));
      for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return s;
    }
    case PyOp::lower: {
      auto s = as_text(kid(0));
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }
    case PyOp::reverse_text: { auto s = as_text(kid(0)); std::reverse(s.begin(), s.end()); return s; }
    case PyOp::replace_k: {
      const auto s = as_text(kid(0));
      std::string out;
      for (std::size_t i = 0; i < s.size();) {
        if (s.compare(i, e.a.size(), e.a) == 0) {
          out += e.b;
          i += e.a.size();
        } else {
          out += s[i++];
        }
      }
      return out;
    }
    case PyOp::concat: return as_text(kid(0)) + as_text(kid(1));
    case PyOp::repeat_k: {
      const auto s = as_text(kid(0));
      std::string out;
      for (std::int64_t i = 0; i < e.k; ++i) out += s;
      return out;
    }
    case PyOp::str_of: return std::to_string(as_int(kid(0)));
    case PyOp::join_k: {
      std::string out;
      bool first = true;
      for (auto v : as_list(kid(0))) {
        if (!first) out += e.a;
        first = false;
        out += std::to_string(v);
      }
      return out;
    }
    case PyOp::take_text_k: return as_text(kid(0)).substr(0, static_cast<std::size_t>(e.k));
  }
  throw std::logic_error("evaluate: an unknown operation");
}

std::string py_quoted(const std::string& s) { return "'" + s + "'"; }  // letters, digits and separators only

std::string py_number(std::int64_t k) { return k < 0 ? "(" + std::to_string(k) + ")" : std::to_string(k); }

std::string python_expr(const PyExpr& e, const PyFunction& fn, const std::vector<PyFunction>& project) {
  const auto kid = [&](std::size_t i) { return python_expr(e.kids[i], fn, project); };
  switch (e.op) {
    case PyOp::param: return fn.params.at(static_cast<std::size_t>(e.index));
    case PyOp::constant: return e.type == PyType::text ? py_quoted(e.a) : py_number(e.k);
    case PyOp::item: return "x";
    case PyOp::call: {
      std::string s = project.at(static_cast<std::size_t>(e.index)).name + "(";
      for (std::size_t i = 0; i < e.kids.size(); ++i) s += (i ? ", " : "") + kid(i);
      return s + ")";
    }
    case PyOp::add: return "(" + kid(0) + " + " + kid(1) + ")";
    case PyOp::sub: return "(" + kid(0) + " - " + kid(1) + ")";
    case PyOp::mul_k: return "(" + kid(0) + " * " + py_number(e.k) + ")";
    case PyOp::floordiv_k: return "(" + kid(0) + " // " + py_number(e.k) + ")";
    case PyOp::mod_k: return "(" + kid(0) + " % " + py_number(e.k) + ")";
    case PyOp::max2: return "max(" + kid(0) + ", " + kid(1) + ")";
    case PyOp::min2: return "min(" + kid(0) + ", " + kid(1) + ")";
    case PyOp::abs1: return "abs(" + kid(0) + ")";
    case PyOp::len_list: case PyOp::len_text: return "len(" + kid(0) + ")";
    case PyOp::sum_list: return "sum(" + kid(0) + ")";
    case PyOp::count_k: return kid(0) + ".count(" + py_quoted(e.a) + ")";
    case PyOp::first_or_k: {
      const auto l = kid(0);
      return "(" + l + "[0] if " + l + " else " + py_number(e.k) + ")";
    }
    case PyOp::map: return "[" + kid(1) + " for x in " + kid(0) + "]";
    case PyOp::filter: {
      std::string cond;
      switch (e.cond) {
        case PyCond::mod_eq: cond = "x % " + py_number(e.k) + " == " + py_number(e.r); break;
        case PyCond::greater: cond = "x > " + py_number(e.k); break;
        case PyCond::less: cond = "x < " + py_number(e.k); break;
        case PyCond::not_equal: cond = "x != " + py_number(e.k); break;
      }
      return "[x for x in " + kid(0) + " if " + cond + "]";
    }
    case PyOp::sorted: return "sorted(" + kid(0) + ")";
    case PyOp::reversed: return "list(reversed(" + kid(0) + "))";
    case PyOp::take_k: return kid(0) + "[:" + std::to_string(e.k) + "]";
    case PyOp::drop_k: return kid(0) + "[" + std::to_string(e.k) + ":]";
    case PyOp::append: return "(" + kid(0) + " + [" + kid(1) + "])";
    case PyOp::upper: return kid(0) + ".upper()";
    case PyOp::lower: return kid(0) + ".lower()";
    case PyOp::reverse_text: return kid(0) + "[::-1]";
    case PyOp::replace_k: return kid(0) + ".replace(" + py_quoted(e.a) + ", " + py_quoted(e.b) + ")";
    case PyOp::concat: return "(" + kid(0) + " + " + kid(1) + ")";
    case PyOp::repeat_k: return "(" + kid(0) + " * " + std::to_string(e.k) + ")";
    case PyOp::str_of: return "str(" + kid(0) + ")";
    case PyOp::join_k: return py_quoted(e.a) + ".join(str(x) for x in " + kid(0) + ")";
    case PyOp::take_text_k: return kid(0) + "[:" + std::to_string(e.k) + "]";
  }
  return "?";
}

std::string python_value(const PyValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&v)) return py_quoted(*s);
  std::string out = "[";
  bool first = true;
  for (auto x : std::get<std::vector<std::int64_t>>(v)) {
    out += (first ? "" : ", ") + std::to_string(x);
    first = false;
  }
  return out + "]";
}

std::string expr_shape(const PyExpr& e) {
  switch (e.op) {
    case PyOp::param: return "p";
    case PyOp::constant: return "k";
    case PyOp::item: return "x";
    default: break;
  }
  std::string s = py_op_name(e.op);
  if (e.op == PyOp::filter) s += std::to_string(static_cast<int>(e.cond));
  s += "(";
  for (std::size_t i = 0; i < e.kids.size(); ++i) s += (i ? "," : "") + expr_shape(e.kids[i]);
  return s + ")";
}

std::vector<PyValue> random_args(const std::vector<PyType>& types, std::mt19937_64& rng) {
  std::vector<PyValue> out;
  const auto small = [&] { return static_cast<std::int64_t>(rng() % 41) - 20; };
  for (auto t : types) {
    if (t == PyType::integer) {
      out.emplace_back(small());
    } else if (t == PyType::list) {
      std::vector<std::int64_t> l(rng() % 7);
      for (auto& x : l) x = small();
      out.emplace_back(std::move(l));
    } else {
      std::string s(rng() % 9, 'a');
      for (auto& c : s) c = static_cast<char>('a' + rng() % 5);
      out.emplace_back(std::move(s));
    }
  }
  return out;
}

}  // namespace rlx
