// The standalone GPU build (bench/gpu/run.sh) links the token learner
// without the tokenizer and Hugging Face checkpoint readers, whose JSON and
// regex dependencies a GPU machine without the Debian stack lacks.
// rlx-gpu-token-check uses neither (no SFT step, no model file): these
// definitions only satisfy the linker, and fail loudly if ever reached.
#include <stdexcept>

#include "envs/tokens/tokenizer.hpp"
#include "policy/hf_checkpoint.hpp"

namespace rlx {

std::shared_ptr<const Tokenizer> run_tokenizer(const std::string& spec) {
  throw std::logic_error("run_tokenizer(" + spec + "): not in the standalone GPU build (bench/gpu/standalone_stubs.cpp)");
}

Result<std::string> load_policy_init(MoETransformer&, const std::string& init) {
  return make_error(Errc::invalid_field, "load_policy_init(" + init + "): not in the standalone GPU build (bench/gpu/standalone_stubs.cpp)");
}

}  // namespace rlx
