#include "tools/serve_env.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>
#include <unistd.h>

#include "envs/vector_env.hpp"
#include "envs/workspace/tool_service.hpp"
#include "messages/extenv.capnp.h"

namespace rlx {
namespace {

void write_all(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

int serve_env(const std::string& name, EnvProtocol protocol, const EnvRegistry& registry) {
  const EnvFactory* factory = registry.find(name);
  if (!factory) {
    std::fprintf(stderr, "rlx serve-env: unknown env '%s'\n", name.c_str());
    return 2;
  }
  const EnvSpec spec = (*factory)(0, 0)->spec();
  std::unique_ptr<VectorEnv> envs;
  EnvStepResultData out;
  capnp::JsonCodec codec;
  kj::FdInputStream raw_in(STDIN_FILENO);
  kj::BufferedInputStreamWrapper in(raw_in);
  std::string line;
  for (;;) {
    // Read one request.
    capnp::MallocMessageBuilder request_msg;
    wire::EnvRequest::Reader req;
    std::unique_ptr<capnp::InputStreamMessageReader> reader;
    if (protocol == EnvProtocol::json) {
      line.clear();
      int c;
      while ((c = std::getc(stdin)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
      if (c == EOF && line.empty()) return 0;
      auto root = request_msg.initRoot<wire::EnvRequest>();
      try {
        codec.decode(kj::ArrayPtr<const char>(line.data(), line.size()), root);
      } catch (const kj::Exception& e) {
        std::fprintf(stderr, "rlx serve-env: unreadable request: %s\n", e.getDescription().cStr());
        return 1;
      }
      req = root.asReader();
    } else {
      if (!in.tryGetReadBuffer().size()) return 0;
      reader = std::make_unique<capnp::InputStreamMessageReader>(in);
      req = reader->getRoot<wire::EnvRequest>();
    }
    // Answer it.
    capnp::MallocMessageBuilder reply_msg;
    auto reply = reply_msg.initRoot<wire::EnvResponse>();
    auto fill = [&](const EnvStepResultData& r) {
      auto b = reply.initResult();
      auto obs = b.initObservations(static_cast<unsigned>(r.observations.size()));
      for (unsigned i = 0; i < r.observations.size(); ++i) obs.set(i, r.observations[i]);
      auto rew = b.initRewards(static_cast<unsigned>(r.rewards.size()));
      auto term = b.initTerminated(static_cast<unsigned>(r.rewards.size()));
      auto trunc = b.initTruncated(static_cast<unsigned>(r.rewards.size()));
      for (unsigned i = 0; i < r.rewards.size(); ++i) {
        rew.set(i, r.rewards[i]);
        term.set(i, r.terminated[i]);
        trunc.set(i, r.truncated[i]);
      }
    };
    switch (req.which()) {
      case wire::EnvRequest::SPEC: {
        auto s = reply.initSpec();
        s.setName(kj::StringPtr(spec.name.c_str()));
        s.setObsDim(static_cast<std::uint32_t>(spec.obs_dim));
        s.setNumActions(static_cast<std::uint32_t>(spec.num_actions));
        s.setMaxEpisodeSteps(static_cast<std::uint32_t>(spec.max_episode_steps));
        break;
      }
      case wire::EnvRequest::RESET: {
        auto r = req.getReset();
        envs = std::make_unique<VectorEnv>(*factory, r.getSeed(), r.getFirstEnvId(), static_cast<int>(r.getNumEnvs()));
        envs->reset(out);
        fill(out);
        break;
      }
      case wire::EnvRequest::STEP: {
        auto a = req.getStep();
        std::vector<std::int64_t> actions;
        bool in_range = true;
        for (auto x : a) {
          actions.push_back(x);
          in_range = in_range && x >= 0 && x < spec.num_actions;
        }
        if (!envs || static_cast<int>(actions.size()) != envs->size() || !in_range) {
          reply.setError("step before reset, a wrong number of actions, or an action out of range");
          break;
        }
        envs->step(actions, out);
        fill(out);
        break;
      }
      case wire::EnvRequest::CLOSE:
        return 0;
      default:
        reply.setError("unknown request");
    }
    if (protocol == EnvProtocol::json) {
      auto text = codec.encode(reply.asReader());
      write_all(text.begin(), text.size());
      write_all("\n", 1);
    } else {
      auto words = capnp::messageToFlatArray(reply_msg);
      write_all(words.begin(), words.size() * sizeof(capnp::word));
    }
  }
}

int workspace_tools_command(int max_turns) {
  auto sandbox = Sandbox::open();
  if (!sandbox) {
    std::fprintf(stderr, "rlx workspace-tools: %s\n", sandbox.error().message.c_str());
    return 1;
  }
  EpisodeLimits limits;
  limits.max_turns = max_turns;
  WorkspaceToolService service(*sandbox, limits);
  return serve_workspace_tools(service);
}

}  // namespace rlx
