#include "messages/extenv_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "messages/extenv.capnp.h"

namespace rlx {

namespace {

Error garbled(std::string why) { return make_error(Errc::env_failed, std::move(why)); }

// Decodes a reply and hands its reader to `use`; what `use` returns, or
// the decoder's complaint.
template <class T, class Use>
Result<T> with_reply(EnvProtocol protocol, std::span<const unsigned char> reply, Use&& use) {
  try {
    if (protocol == EnvProtocol::json) {
      capnp::JsonCodec codec;
      capnp::MallocMessageBuilder mb;
      auto root = mb.initRoot<wire::EnvResponse>();
      codec.decode(kj::ArrayPtr<const char>(reinterpret_cast<const char*>(reply.data()), reply.size()), root);
      return use(root.asReader());
    }
    kj::Array<capnp::word> words = kj::heapArray<capnp::word>(reply.size() / 8);
    std::memcpy(words.begin(), reply.data(), words.size() * 8);
    capnp::FlatArrayMessageReader reader(words);
    return use(reader.getRoot<wire::EnvResponse>());
  } catch (const kj::Exception& e) {
    const std::string text(reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(reply.size(), 60)));
    return garbled("garbage: " + std::string(e.getDescription().cStr()).substr(0, 120) + " (got \"" + text + "\")");
  }
}

// Nothing when the reply is of the `want` kind; else why not (the env's
// own error, or a reply of another kind).
std::optional<Error> not_a(wire::EnvResponse::Reader r, wire::EnvResponse::Which want) {
  if (r.which() == want) return std::nullopt;
  return garbled(r.isError() ? std::string("the env reported: ") + r.getError().cStr()
                             : std::string("garbage: expected a ") + (want == wire::EnvResponse::SPEC ? "spec" : "result"));
}

}  // namespace

Result<ExtEnvSpec> parse_ext_env_spec(EnvProtocol protocol, std::span<const unsigned char> reply) {
  return with_reply<ExtEnvSpec>(protocol, reply, [](wire::EnvResponse::Reader r) -> Result<ExtEnvSpec> {
    if (auto e = not_a(r, wire::EnvResponse::SPEC)) return *e;
    auto s = r.getSpec();
    if (s.getObsDim() == 0 || s.getNumActions() == 0 || s.getObsDim() > 1 << 20)
      return garbled("a spec with obsDim " + std::to_string(s.getObsDim()) + " and numActions " +
                     std::to_string(s.getNumActions()));
    return ExtEnvSpec{s.getName().cStr(), s.getObsDim(), s.getNumActions(), s.getMaxEpisodeSteps()};
  });
}

Result<EnvStepResultData> parse_ext_env_result(EnvProtocol protocol, std::span<const unsigned char> reply,
                                               std::size_t B, std::size_t D, std::vector<std::string>* hints) {
  return with_reply<EnvStepResultData>(protocol, reply, [&](wire::EnvResponse::Reader r) -> Result<EnvStepResultData> {
    if (auto e = not_a(r, wire::EnvResponse::RESULT)) return *e;
    auto b = r.getResult();
    if (b.getObservations().size() != B * D || b.getRewards().size() != B || b.getTerminated().size() != B ||
        b.getTruncated().size() != B)
      return garbled("wrong sizes: " + std::to_string(b.getObservations().size()) + " observation floats (want " +
                     std::to_string(B * D) + "), " + std::to_string(b.getRewards().size()) + " rewards (want " +
                     std::to_string(B) + ")");
    if (b.getHints().size() != 0 && b.getHints().size() != B)
      return garbled("wrong sizes: " + std::to_string(b.getHints().size()) + " hints (want 0 or " + std::to_string(B) + ")");
    if (b.getRewardPayloads().size() != 0 && b.getRewardPayloads().size() != B)
      return garbled("wrong sizes: " + std::to_string(b.getRewardPayloads().size()) + " reward payloads (want 0 or " +
                     std::to_string(B) + ")");
    EnvStepResultData out;
    out.obs_dim = static_cast<std::uint32_t>(D);
    for (float f : b.getObservations()) {
      if (!std::isfinite(f)) return garbled("a non-finite observation");
      out.observations.push_back(f);
    }
    for (float f : b.getRewards()) {
      if (!std::isfinite(f)) return garbled("a non-finite reward");
      out.rewards.push_back(f);
    }
    for (std::size_t i = 0; i < B; ++i) {
      out.terminated.push_back(b.getTerminated()[i]);
      out.truncated.push_back(b.getTruncated()[i]);
    }
    out.lost.assign(B, 0);
    for (auto p : b.getRewardPayloads()) out.reward_payloads.emplace_back(p.cStr());
    if (b.getFinalObservations().size() != 0) {
      if (b.getFinalObservations().size() != B * D)
        return garbled("wrong sizes: " + std::to_string(b.getFinalObservations().size()) +
                       " final observation floats (want 0 or " + std::to_string(B * D) + ")");
      for (float f : b.getFinalObservations()) {
        if (!std::isfinite(f)) return garbled("a non-finite final observation");
        out.final_observations.push_back(f);
      }
    }
    if (hints)
      for (auto h : b.getHints()) hints->emplace_back(h.cStr());
    return out;
  });
}

}  // namespace rlx
