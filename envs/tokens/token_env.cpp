#include "envs/tokens/token_env.hpp"

#include "envs/tokens/tokenizer.hpp"

namespace rlx {

std::string token_env_kind(const std::string& env) {
  return env.rfind("tokens:", 0) == 0 ? env.substr(7) : std::string();
}

namespace {

class TokenSpecEnv : public BatchEnv {
 public:
  explicit TokenSpecEnv(const std::string& name) {
    spec_.name = name;
    spec_.obs_dim = 0;
    // The character vocabulary's size; a token run's policy takes its size
    // from [tokens] tokenizer, never from here (no actor steps this env).
    spec_.num_actions = static_cast<int>(Tokenizer::characters()->vocab());
  }
  const EnvSpec& spec() const override { return spec_; }
  int size() const override { return 0; }
  void reset(EnvStepResultData&) override { refuse(); }
  void step(const std::vector<std::int64_t>&, EnvStepResultData&) override { refuse(); }

 private:
  [[noreturn]] void refuse() const {
    throw EnvFailure(spec_.name + ": token tasks are decoded by the explorer, not stepped as an environment");
  }
  EnvSpec spec_;
};

}  // namespace

std::unique_ptr<BatchEnv> make_token_spec_env(const std::string& env) { return std::make_unique<TokenSpecEnv>(env); }

}  // namespace rlx
