// describe_expr (python_program.hpp): what an expression computes, in words.
#include "envs/workspace/python_program.hpp"
#include "envs/workspace/python_source.hpp"

namespace rlx {

std::string describe_expr(const PyExpr& e, const PyFunction& fn, const std::vector<PyFunction>& project) {
  // A compound operand is parenthesised, so every phrase reads one way.
  const auto kid = [&](std::size_t i) {
    const auto& k = e.kids[i];
    const bool simple = k.op == PyOp::param || k.op == PyOp::constant || k.op == PyOp::item || k.op == PyOp::call;
    const auto d = describe_expr(k, fn, project);
    return simple ? d : "(" + d + ")";
  };
  const auto k = py_number(e.k);
  switch (e.op) {
    case PyOp::param: return fn.params.at(static_cast<std::size_t>(e.index));
    case PyOp::constant: return e.type == PyType::text ? py_quoted(e.a) : py_number(e.k);
    case PyOp::item: return "x";
    case PyOp::call: {
      std::string s = project.at(static_cast<std::size_t>(e.index)).name + "(";
      for (std::size_t i = 0; i < e.kids.size(); ++i) s += (i ? ", " : "") + describe_expr(e.kids[i], fn, project);
      return s + ")";
    }
    case PyOp::add: return kid(0) + " plus " + kid(1);
    case PyOp::sub: return kid(0) + " minus " + kid(1);
    case PyOp::mul_k: return kid(0) + " times " + k;
    case PyOp::floordiv_k: return kid(0) + " floor-divided by " + k;
    case PyOp::mod_k: return kid(0) + " modulo " + k;
    case PyOp::max2: return "the larger of " + kid(0) + " and " + kid(1);
    case PyOp::min2: return "the smaller of " + kid(0) + " and " + kid(1);
    case PyOp::abs1: return "the absolute value of " + kid(0);
    case PyOp::len_list: return "the number of items in " + kid(0);
    case PyOp::sum_list: return "the sum of " + kid(0);
    case PyOp::len_text: return "the length of " + kid(0);
    case PyOp::count_k: return "the number of times " + py_quoted(e.a) + " occurs in " + kid(0);
    case PyOp::first_or_k: return "the first item of " + kid(0) + ", or " + k + " when it is empty";
    case PyOp::map: return "each item x of " + kid(0) + " mapped to " + describe_expr(e.kids[1], fn, project);
    case PyOp::filter: {
      std::string cond;
      switch (e.cond) {
        case PyCond::mod_eq: cond = "x modulo " + k + " is " + py_number(e.r); break;
        case PyCond::greater: cond = "x is greater than " + k; break;
        case PyCond::less: cond = "x is less than " + k; break;
        case PyCond::not_equal: cond = "x is not " + k; break;
      }
      return "the items x of " + kid(0) + " where " + cond;
    }
    case PyOp::sorted: return kid(0) + " sorted in ascending order";
    case PyOp::reversed: return kid(0) + " in reverse order";
    case PyOp::take_k: return "the first " + k + " items of " + kid(0);
    case PyOp::drop_k: return kid(0) + " without its first " + k + " items";
    case PyOp::append: return kid(0) + " with " + kid(1) + " appended";
    case PyOp::upper: return kid(0) + " in upper case";
    case PyOp::lower: return kid(0) + " in lower case";
    case PyOp::reverse_text: return kid(0) + " reversed";
    case PyOp::replace_k: return kid(0) + " with every " + py_quoted(e.a) + " replaced by " + py_quoted(e.b);
    case PyOp::concat: return kid(0) + " followed by " + kid(1);
    case PyOp::repeat_k: return kid(0) + " repeated " + k + " times";
    case PyOp::str_of: return kid(0) + " written in decimal";
    case PyOp::join_k: return "the items of " + kid(0) + " written in decimal and joined by " + py_quoted(e.a);
    case PyOp::take_text_k: return "the first " + k + " characters of " + kid(0);
  }
  return "?";
}

}  // namespace rlx
