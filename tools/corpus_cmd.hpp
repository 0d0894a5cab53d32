// `rlx corpus`: the text a subword vocabulary is trained on
// (tools/train-tokenizer.sh): the expert's whole transcripts (prompt,
// turns, observations) of workspace tasks drawn from the training
// generator only, a line of text per line of the file. Held-out tasks are
// never drawn, so a vocabulary trained on it has seen none of their
// names or constants. docs/token-policy.md "Vocabularies".
#pragma once

#include <cstdint>
#include <string>

namespace rlx {

struct CorpusArgs {
  int tasks = 400;               // transcripts; difficulties 1, 2, 3 in turn
  std::uint64_t seed = 1;        // the task draws
  std::string out;               // the text file written
};

// 0: written; 2: the sandbox is missing or failed, or the file could not be written.
int corpus_command(const CorpusArgs& args);

}  // namespace rlx
