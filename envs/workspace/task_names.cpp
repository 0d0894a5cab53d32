#include "envs/workspace/task_names.hpp"

#include <algorithm>

namespace rlx {

namespace {

// Each split's own vocabulary: nothing below is shared between the two.
// Training names are made up, syllable by syllable, for each project, so
// a policy cannot recall them and must copy the names a task shows (with
// a few dozen real words it recalled them: on a held-out task it read a
// training module's file). The syllables are English-like (an onset such
// as "br" or "st", a vowel, a coda such as "nd"), so the made-up names
// are spelled with the same letters and pieces as real words: trained on
// names of plain consonant-vowel syllables, a policy copied them (0.94 of
// fresh training episodes opened the hole's file) and no held-out name
// (0.00). Held-out tasks take real words from pools of their own; a
// made-up word equal to one of them (or to a Python keyword or builtin)
// is drawn again, so no training task ever holds one. One made-up word in
// four is plain random letters (made_up_word).
struct SplitWords {
  bool made_up = false;  // names drawn syllable by syllable (training)
  std::vector<std::string> modules, verbs, nouns, int_params, list_params, text_params;
  PyVocabulary vocab;
};

const SplitWords& words(TaskSplit split) {
  static const SplitWords train = [] {
    SplitWords w;
    w.made_up = true;
    w.vocab.constants = {2, 3, 5, 7, 10, 12, 13, 15};
    w.vocab.letters = {"a", "b", "c", "-"};
    return w;
  }();
  static const SplitWords held_out = [] {
    SplitWords w;
    w.modules = {"orbits", "recipes", "weather", "library", "harbor", "garden"};
    w.verbs = {"blend", "sweep", "align", "clip", "gather", "spread", "weigh", "drift"};
    w.nouns = {"tides", "grains", "pages", "stars", "seeds", "cells"};
    w.int_params = {"k", "q", "depth", "width"};
    w.list_params = {"nums", "samples", "heights", "readings"};
    w.text_params = {"text", "name", "code", "motto"};
    w.vocab.constants = {4, 6, 8, 9, 11};
    w.vocab.letters = {"d", "e", ":", "+"};
    return w;
  }();
  return split == TaskSplit::train ? train : held_out;
}

// Words a made-up name must not be: every held-out name, and what the
// generated Python means by a name of its own (keywords, builtins, the
// comprehension's variable, the project's folders).
bool forbidden_word(const std::string& s) {
  static const std::set<std::string> all = [] {
    const SplitWords& h = words(TaskSplit::held_out);
    std::set<std::string> a;
    for (const auto* pool : {&h.modules, &h.verbs, &h.nouns, &h.int_params, &h.list_params, &h.text_params})
      a.insert(pool->begin(), pool->end());
    for (const char* w : {"and", "as", "assert", "async", "await", "break", "case", "class", "continue", "def", "del",
                          "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
                          "lambda", "match", "nonlocal", "not", "or", "pass", "raise", "return", "try", "type", "while",
                          "with", "yield", "abs", "all", "any", "ascii", "bin", "bool", "bytes", "chr", "dict", "dir",
                          "divmod", "enumerate", "eval", "exec", "filter", "float", "format", "hash", "help", "hex", "id",
                          "input", "int", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "open",
                          "ord", "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str",
                          "sum", "super", "tuple", "vars", "zip", "self", "x", "pkg", "tests", "hidden", "run_tests"})
      a.insert(w);
    return a;
  }();
  return all.count(s) > 0;
}

// A made-up word of `syllables` English-like syllables (or, one in four,
// of 2-4 random letters a syllable), none forbidden.
std::string made_up_word(int syllables, std::mt19937_64& rng) {
  static const std::vector<std::string> onsets = {
      "",   "",   "",  "b",  "bl", "br", "c",  "ch", "cl", "cr", "d",  "dr", "f",  "fl", "fr", "g",  "gl", "gr", "h",
      "j",  "k",  "l", "m",  "n",  "p",  "pl", "pr", "r",  "s",  "sh", "sk", "sl", "sm", "sn", "sp", "st", "sw", "t",
      "th", "tr", "v", "w",  "wh", "y",  "z"};
  static const std::vector<std::string> vowels = {"a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou"};
  static const std::vector<std::string> codas = {"",   "",   "",   "",   "b",  "ck", "d",  "g",  "k",  "l",  "ld",
                                                 "lt", "m",  "mp", "n",  "nd", "ng", "nk", "nt", "p",  "r",  "rd",
                                                 "rk", "rm", "rn", "rt", "s",  "sk", "ss", "st", "t",  "th", "x"};
  for (;;) {
    std::string s;
    if (rng() % 4 == 0) {
      // One word in four is letters drawn alike, 2-4 a syllable: the next
      // letter of such a name can only be copied, never guessed from how
      // names are spelled. (With syllables alone a policy copied training
      // names and cut real ones short where their spelling left the
      // syllables': "librar" for "library".)
      const int letters = syllables * 2 + static_cast<int>(rng() % (syllables * 2 + 1));
      for (int i = 0; i < letters; ++i) s += static_cast<char>('a' + rng() % 26);
    } else {
      for (int i = 0; i < syllables; ++i)
        s += onsets[rng() % onsets.size()] + vowels[rng() % vowels.size()] + codas[rng() % codas.size()];
    }
    if (s.size() >= 2 && !forbidden_word(s)) return s;
  }
}

}  // namespace

const PyVocabulary& split_vocabulary(TaskSplit split) { return words(split).vocab; }

std::string function_name(TaskSplit split, std::set<std::string>& taken, std::mt19937_64& rng) {
  const SplitWords& w = words(split);
  for (;;) {
    std::string n = w.made_up ? made_up_word(1, rng) + "_" + made_up_word(1 + static_cast<int>(rng() % 2), rng)
                              : w.verbs[rng() % w.verbs.size()] + "_" + w.nouns[rng() % w.nouns.size()];
    if (taken.insert(n).second) return n;
  }
}

std::vector<std::string> module_names(TaskSplit split, int count, std::mt19937_64& rng) {
  const SplitWords& w = words(split);
  std::vector<std::string> modules = w.modules;
  if (w.made_up) {
    std::set<std::string> taken;
    while (static_cast<int>(modules.size()) < count)
      if (auto m = made_up_word(2, rng); taken.insert(m).second) modules.push_back(m);
    return modules;
  }
  std::shuffle(modules.begin(), modules.end(), rng);
  modules.resize(static_cast<std::size_t>(count));
  return modules;
}

std::string param_name(TaskSplit split, PyType t, std::mt19937_64& rng) {
  const SplitWords& w = words(split);
  if (w.made_up) return made_up_word(1, rng);
  const auto& pool = t == PyType::integer ? w.int_params : t == PyType::list ? w.list_params : w.text_params;
  return pool[rng() % pool.size()];
}

}  // namespace rlx
