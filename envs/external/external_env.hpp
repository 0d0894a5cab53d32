// An environment process in any language, spoken to over its stdin/stdout
// with the protocol of messages/extenv.capnp (docs/external-envs.md):
// JSON lines or Cap'n Proto framing. One process runs B envs.
//
// Failures are expected and bounded: a process that exits, hangs past the
// timeout, prints garbage, answers with the wrong sizes or reports an
// error is killed and restarted (at most max_restarts times over the
// object's life). The step that failed returns every env's episode as
// `lost` (and truncated), never as a real end. Past the budget, step()
// and reset() throw EnvFailure. No zombie is left: the destructor kills
// and reaps the process.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

#include "core/choices.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"

namespace rlx {

struct ExternalEnvOptions {
  std::vector<std::string> argv;      // program and arguments (argv[0] is looked up in PATH)
  std::string cwd;                    // working directory; empty = inherit
  std::vector<std::string> env;       // extra "KEY=VALUE" entries for its environment
  EnvProtocol protocol = EnvProtocol::json;  // json | capnp
  std::chrono::milliseconds timeout{10000};  // per request
  int max_restarts = 3;               // restarts allowed over the object's life
  std::string name = "env";           // for logs ("explorer/3 env")
  Logger log;
};

class ExternalEnv : public BatchEnv {
 public:
  // Starts the process and asks for its spec. Throws EnvFailure if it
  // cannot be started within the restart budget.
  ExternalEnv(ExternalEnvOptions options, std::uint64_t seed, std::uint64_t first_env_id, int num_envs);
  ~ExternalEnv() override;

  const EnvSpec& spec() const override { return spec_; }
  int size() const override { return num_envs_; }
  void reset(EnvStepResultData& out) override;
  void step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) override;

  int restarts() const { return restarts_; }
  std::uint64_t lost_episodes() const { return lost_episodes_; }

 private:
  struct Reply;  // a decoded EnvResponse
  void start();
  void stop();
  // Sends a request and waits for the reply; returns false (with `why`) on any failure.
  bool call_spec(std::string& why);
  bool call_reset(EnvStepResultData& out, std::string& why);
  bool call_step(const std::vector<std::int64_t>& actions, EnvStepResultData& out, std::string& why);
  bool exchange(const std::vector<unsigned char>& request, std::vector<unsigned char>& reply, std::string& why);
  bool fill(std::chrono::steady_clock::time_point deadline, std::string& why);  // reads more into buffer_
  bool read_bytes(unsigned char* dst, std::size_t n, std::chrono::steady_clock::time_point deadline, std::string& why);
  bool read_line(std::vector<unsigned char>& line, std::chrono::steady_clock::time_point deadline, std::string& why);
  bool parse_result(const std::vector<unsigned char>& reply, EnvStepResultData& out, std::string& why);
  // Kills, restarts and resets after a failure; fills `out` as a lost step.
  void recover(const std::string& why, EnvStepResultData& out);

  ExternalEnvOptions options_;
  std::uint64_t seed_, first_env_id_;
  int num_envs_;
  EnvSpec spec_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::vector<unsigned char> buffer_;  // bytes read past the last reply
  int restarts_ = 0;
  std::uint64_t lost_episodes_ = 0;
};

// "exec:python3 envs/cartpole.py" -> {"python3", "envs/cartpole.py"}
// (whitespace-separated; empty when `env` is not an exec: name).
std::vector<std::string> exec_argv(const std::string& env);

}  // namespace rlx
