// The names and vocabulary a workspace task of each split draws from
// (docs/workspace.md "Held out by construction"). Training names are made
// up for each project from English-like syllables; held-out names are
// real words from pools of their own, which no made-up name can equal.
// CAF-free.
#pragma once

#include <random>
#include <set>
#include <string>
#include <vector>

#include "envs/workspace/python_program.hpp"
#include "envs/workspace/workspace_task.hpp"

namespace rlx {

// The constants and letters a split's bodies use.
const PyVocabulary& split_vocabulary(TaskSplit split);
// A function name ("verb_noun") not yet in `taken`, which it joins.
std::string function_name(TaskSplit split, std::set<std::string>& taken, std::mt19937_64& rng);
// `count` distinct module names for one project.
std::vector<std::string> module_names(TaskSplit split, int count, std::mt19937_64& rng);
// A parameter's name for a value of type `t` (callers keep a function's apart).
std::string param_name(TaskSplit split, PyType t, std::mt19937_64& rng);

}  // namespace rlx
