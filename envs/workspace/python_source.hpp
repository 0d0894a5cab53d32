// Python source text of constants, shared by the printers of python_program
// (the code) and python_describe (the words). Internal to envs/workspace.
#pragma once

#include <cstdint>
#include <string>

namespace rlx {

std::string py_quoted(const std::string& s);  // 'ab' (letters, digits and separators only)
std::string py_number(std::int64_t k);        // 3, (-3)

}  // namespace rlx
