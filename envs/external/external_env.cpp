#include "envs/external/external_env.hpp"

#include "core/child_process.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <mutex>
#include <sstream>

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "messages/extenv.capnp.h"
#include "messages/extenv_codec.hpp"
#include "messages/stream_frame.hpp"

extern char** environ;

namespace rlx {
namespace {

constexpr std::size_t kMaxReplyBytes = std::size_t{64} << 20;

std::vector<unsigned char> to_bytes(kj::ArrayPtr<const capnp::word> words) {
  auto b = words.asBytes();
  return {b.begin(), b.end()};
}

}  // namespace

std::vector<std::string> exec_argv(const std::string& env) {
  std::vector<std::string> argv;
  if (env.rfind("exec:", 0) != 0) return argv;
  std::istringstream in(env.substr(5));
  for (std::string word; in >> word;) argv.push_back(word);
  return argv;
}

ExternalEnv::ExternalEnv(ExternalEnvOptions options, std::uint64_t seed, std::uint64_t first_env_id, int num_envs)
    : options_(std::move(options)), seed_(seed), first_env_id_(first_env_id), num_envs_(num_envs) {
  RLX_REQUIRE(!options_.argv.empty());
  RLX_REQUIRE(num_envs_ > 0, num_envs_);
  if (!options_.log) options_.log = null_logger();
  // A child that dies makes our next write fail (EPIPE), handled as a value.
  ignore_sigpipe();
  start();
  std::string why;
  while (!call_spec(why)) {
    if (++restarts_ > options_.max_restarts)
      throw EnvFailure(options_.name + ": " + why + "; restart budget of " + std::to_string(options_.max_restarts) +
                       " spent");
    options_.log->warn("{}: {}; restarting ({} of {})", options_.name, why, restarts_, options_.max_restarts);
    stop();
    start();
  }
}

ExternalEnv::~ExternalEnv() { stop(); }

void ExternalEnv::start() {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) throw EnvFailure(options_.name + ": pipe: " + std::strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    throw EnvFailure(options_.name + ": pipe: " + std::strerror(errno));
  }
  ChildOptions co;
  co.env = options_.env;
  co.stdin_fd = in_pipe[0];
  co.stdout_fd = out_pipe[1];
  co.cwd = options_.cwd;
  co.search_path = true;  // "python3 env.py"
  auto child = spawn_child(options_.argv, co);
  pid_ = child ? *child : -1;
  close(in_pipe[0]);
  close(out_pipe[1]);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  buffer_.clear();
  if (!child) {
    // Reported on the first exchange as "the process is not running".
    options_.log->error("{}: {}", options_.name, child.error().message);
  }
}

void ExternalEnv::stop() {
  if (to_child_ >= 0 && pid_ > 0) {
    // Best effort: a polite close first; the kill below makes sure.
    capnp::MallocMessageBuilder mb;
    mb.initRoot<wire::EnvRequest>().setClose();
    std::vector<unsigned char> req;
    if (options_.protocol == EnvProtocol::json) {
      capnp::JsonCodec codec;
      auto text = codec.encode(mb.getRoot<wire::EnvRequest>().asReader());
      req.assign(text.begin(), text.end());
      req.push_back('\n');
    } else {
      req = to_bytes(capnp::messageToFlatArray(mb));
    }
    [[maybe_unused]] auto n = write(to_child_, req.data(), req.size());
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

bool ExternalEnv::fill(std::chrono::steady_clock::time_point deadline, std::string& why) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      why = "no answer within " + std::to_string(options_.timeout.count()) + " ms";
      return false;
    }
    pollfd p{from_child_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r <= 0) continue;  // EINTR or timeout: the check above decides
    unsigned char chunk[65536];
    ssize_t got = read(from_child_, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int status = 0;
      std::string how = "closed its output";
      if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
        how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                : "died of signal " + std::to_string(WTERMSIG(status));
        pid_ = -1;
      }
      why = "the process " + how;
      return false;
    }
    buffer_.insert(buffer_.end(), chunk, chunk + got);
    if (buffer_.size() > kMaxReplyBytes) {
      why = "an answer larger than 64 MiB";
      return false;
    }
    return true;
  }
}

bool ExternalEnv::read_bytes(unsigned char* dst, std::size_t n, std::chrono::steady_clock::time_point deadline,
                             std::string& why) {
  while (buffer_.size() < n)
    if (!fill(deadline, why)) return false;
  std::memcpy(dst, buffer_.data(), n);
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(n));
  return true;
}

bool ExternalEnv::read_line(std::vector<unsigned char>& line, std::chrono::steady_clock::time_point deadline,
                            std::string& why) {
  std::size_t scanned = 0;
  for (;;) {
    auto nl = std::find(buffer_.begin() + static_cast<std::ptrdiff_t>(scanned), buffer_.end(), '\n');
    if (nl != buffer_.end()) {
      line.assign(buffer_.begin(), nl);
      buffer_.erase(buffer_.begin(), nl + 1);
      return true;
    }
    scanned = buffer_.size();
    if (!fill(deadline, why)) return false;
  }
}

bool ExternalEnv::exchange(const std::vector<unsigned char>& request, std::vector<unsigned char>& reply,
                           std::string& why) {
  if (pid_ <= 0 || to_child_ < 0) {
    why = "the process is not running";
    return false;
  }
  std::size_t off = 0;
  while (off < request.size()) {
    ssize_t n = write(to_child_, request.data() + off, request.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = std::string("cannot write to the process: ") + std::strerror(errno);
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  if (options_.protocol == EnvProtocol::json) return read_line(reply, deadline, why);
  auto frame = read_stream_frame(
      [&](void* into, std::size_t n) -> Result<void> {
        if (!read_bytes(static_cast<unsigned char*>(into), n, deadline, why)) return make_error(Errc::io, why);
        return {};
      },
      kMaxReplyBytes);
  if (!frame) {
    if (frame.error().code != Errc::io) why = "garbage: " + frame.error().message;  // else: why says it
    return false;
  }
  const auto bytes = frame->bytes();
  reply.assign(reinterpret_cast<const unsigned char*>(bytes.data()),
               reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size());
  return true;
}

namespace {

// Encodes a request in the configured framing.
template <class Fill>
std::vector<unsigned char> make_request(EnvProtocol protocol, Fill&& fill) {
  capnp::MallocMessageBuilder mb;
  fill(mb.initRoot<wire::EnvRequest>());
  if (protocol == EnvProtocol::json) {
    capnp::JsonCodec codec;
    auto text = codec.encode(mb.getRoot<wire::EnvRequest>().asReader());
    std::vector<unsigned char> out(text.begin(), text.end());
    out.push_back('\n');
    return out;
  }
  return to_bytes(capnp::messageToFlatArray(mb));
}

}  // namespace

bool ExternalEnv::call_spec(std::string& why) {
  std::vector<unsigned char> reply;
  if (!exchange(make_request(options_.protocol, [](auto r) { r.setSpec(); }), reply, why)) return false;
  auto s = parse_ext_env_spec(options_.protocol, reply);
  if (!s) {
    why = s.error().message;
    return false;
  }
  EnvSpec spec{s->name, static_cast<int>(s->obs_dim), static_cast<int>(s->num_actions),
               static_cast<int>(s->max_episode_steps)};
  if (spec_.obs_dim != 0 && (spec.obs_dim != spec_.obs_dim || spec.num_actions != spec_.num_actions)) {
    why = "the restarted process changed its spec";
    return false;
  }
  spec_ = spec;
  return true;
}

bool ExternalEnv::parse_result(const std::vector<unsigned char>& reply, EnvStepResultData& out, std::string& why) {
  std::vector<std::string> hints;
  auto r = parse_ext_env_result(options_.protocol, reply, static_cast<std::size_t>(num_envs_),
                                static_cast<std::size_t>(spec_.obs_dim), &hints);
  if (!r) {
    why = r.error().message;
    return false;
  }
  for (const auto& h : hints)
    if (!h.empty()) options_.log->debug("{}: hint: {}", options_.name, h);
  out = std::move(*r);
  return true;
}

bool ExternalEnv::call_reset(EnvStepResultData& out, std::string& why) {
  const auto seed = static_cast<std::uint32_t>(seed_ + 1000003ULL * static_cast<std::uint64_t>(restarts_));
  auto req = make_request(options_.protocol, [&](auto r) {
    auto x = r.initReset();
    x.setSeed(seed);
    x.setFirstEnvId(static_cast<std::uint32_t>(first_env_id_));
    x.setNumEnvs(static_cast<std::uint32_t>(num_envs_));
  });
  std::vector<unsigned char> reply;
  return exchange(req, reply, why) && parse_result(reply, out, why);
}

bool ExternalEnv::call_step(const std::vector<std::int64_t>& actions, EnvStepResultData& out, std::string& why) {
  auto req = make_request(options_.protocol, [&](auto r) {
    auto list = r.initStep(static_cast<unsigned>(actions.size()));
    for (unsigned i = 0; i < actions.size(); ++i) list.set(i, static_cast<std::int32_t>(actions[i]));
  });
  std::vector<unsigned char> reply;
  return exchange(req, reply, why) && parse_result(reply, out, why);
}

void ExternalEnv::recover(const std::string& first_why, EnvStepResultData& out) {
  std::string why = first_why;
  for (;;) {
    if (++restarts_ > options_.max_restarts)
      throw EnvFailure(options_.name + ": " + why + "; restart budget of " + std::to_string(options_.max_restarts) +
                       " spent");
    options_.log->warn("{}: {}; restarting ({} of {}), {} episodes lost", options_.name, why, restarts_,
                       options_.max_restarts, num_envs_);
    stop();
    start();
    if (call_spec(why) && call_reset(out, why)) break;
  }
  const auto B = static_cast<std::size_t>(num_envs_);
  out.rewards.assign(B, 0.0f);
  out.terminated.assign(B, 0);
  out.truncated.assign(B, 1);
  out.lost.assign(B, 1);
  lost_episodes_ += B;
}

void ExternalEnv::reset(EnvStepResultData& out) {
  std::string why;
  if (!call_reset(out, why)) {
    recover(why, out);
    out.truncated.assign(out.truncated.size(), 0);  // nothing had started: nothing is lost
    out.lost.assign(out.lost.size(), 0);
    lost_episodes_ -= static_cast<std::uint64_t>(num_envs_);
  }
  out.step_index = 0;
}

void ExternalEnv::step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) {
  RLX_REQUIRE(static_cast<int>(actions.size()) == num_envs_, actions.size(), num_envs_);
  std::string why;
  if (!call_step(actions, out, why)) recover(why, out);
}

}  // namespace rlx
