// Environment stepping and deferred rewards.
#include <cmath>

#include "messages/codec_detail.hpp"

namespace rlx {
using namespace codec_detail;

WireBuffer encode(const EnvResetData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto r = body.initEnvReset();
    r.setSeed(x.seed);
    r.setNumEnvs(x.num_envs);
  });
}

template <>
Result<EnvResetData> decode<EnvResetData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<EnvResetData>(buf, options, Which::ENV_RESET, [](auto body) {
    auto r = body.getEnvReset();
    return EnvResetData{r.getSeed(), r.getNumEnvs()};
  });
}

WireBuffer encode(const EnvStepData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto s = body.initEnvStep();
    set_tensor(s.initActions(), {static_cast<std::uint32_t>(x.actions.size())}, x.actions);
    s.setStepIndex(x.step_index);
  });
}

template <>
Result<EnvStepData> decode<EnvStepData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<EnvStepData>(buf, options, Which::ENV_STEP, [](auto body) {
    auto s = body.getEnvStep();
    auto shape = s.getActions().getShape();
    if (shape.size() != 1) invalid("actions: rank must be 1");
    EnvStepData x;
    x.actions = read_tensor<std::int64_t>(s.getActions(), {shape[0]}, "actions");
    x.step_index = s.getStepIndex();
    return x;
  });
}

WireBuffer encode(const EnvStepResultData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto s = body.initEnvStepResult();
    const auto B = static_cast<std::uint32_t>(x.rewards.size());
    set_tensor(s.initObservations(), {B, x.obs_dim}, x.observations);
    set_tensor(s.initRewards(), {B}, x.rewards);
    set_tensor(s.initTerminated(), {B}, x.terminated);
    set_tensor(s.initTruncated(), {B}, x.truncated);
    s.setStepIndex(x.step_index);
    if (!x.lost.empty()) set_tensor(s.initLost(), {B}, x.lost);
    if (!x.reward_payloads.empty()) {
      auto p = s.initRewardPayloads(static_cast<unsigned>(x.reward_payloads.size()));
      for (unsigned i = 0; i < x.reward_payloads.size(); ++i) p.set(i, x.reward_payloads[i]);
    }
    if (!x.final_observations.empty()) set_tensor(s.initFinalObservations(), {B, x.obs_dim}, x.final_observations);
  });
}

template <>
Result<EnvStepResultData> decode<EnvStepResultData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<EnvStepResultData>(buf, options, Which::ENV_STEP_RESULT, [](auto body) {
    auto s = body.getEnvStepResult();
    auto shape = s.getObservations().getShape();
    if (shape.size() != 2) invalid("observations: rank must be 2");
    const std::uint64_t B = shape[0];
    EnvStepResultData x;
    x.obs_dim = shape[1];
    x.observations = read_tensor<float>(s.getObservations(), {B, x.obs_dim}, "observations");
    x.rewards = read_tensor<float>(s.getRewards(), {B}, "rewards");
    x.terminated = read_tensor<std::uint8_t>(s.getTerminated(), {B}, "terminated");
    x.truncated = read_tensor<std::uint8_t>(s.getTruncated(), {B}, "truncated");
    x.step_index = s.getStepIndex();
    x.lost = s.hasLost() ? read_tensor<std::uint8_t>(s.getLost(), {B}, "lost") : std::vector<std::uint8_t>(B, 0);
    for (float f : x.observations)
      if (!std::isfinite(f)) invalid("observations: must be finite");
    if (s.hasRewardPayloads()) {
      const auto p = s.getRewardPayloads();
      if (p.size() != B) invalid("rewardPayloads: " + std::to_string(p.size()) + " for " + std::to_string(B) + " envs");
      for (auto t : p) x.reward_payloads.emplace_back(t.cStr(), t.size());
    }
    if (s.hasFinalObservations()) {
      x.final_observations = read_tensor<float>(s.getFinalObservations(), {B, x.obs_dim}, "finalObservations");
      for (float f : x.final_observations)
        if (!std::isfinite(f)) invalid("finalObservations: must be finite");
    }
    return x;
  });
}

WireBuffer encode(const RewardRequestData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto r = body.initRewardRequest();
    r.setRequestId(x.request_id);
    r.setExplorerId(x.explorer_id);
    r.setTask(kj::StringPtr(x.task.c_str()));
    r.setPayload(kj::arrayPtr(reinterpret_cast<const kj::byte*>(x.payload.data()), x.payload.size()));
  });
}

template <>
Result<RewardRequestData> decode<RewardRequestData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<RewardRequestData>(buf, options, Which::REWARD_REQUEST, [](auto body) {
    auto r = body.getRewardRequest();
    RewardRequestData x;
    x.request_id = r.getRequestId();
    x.explorer_id = r.getExplorerId();
    x.task = r.getTask().cStr();
    auto p = r.getPayload();
    x.payload.assign(reinterpret_cast<const char*>(p.begin()), p.size());
    return x;
  });
}

WireBuffer encode(const RewardResultData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto r = body.initRewardResult();
    r.setRequestId(x.request_id);
    r.setScore(x.score);
    r.setOk(x.ok);
    r.setReason(kj::StringPtr(x.reason.c_str()));
    r.setHint(kj::StringPtr(x.hint.c_str()));
    r.setFailure(static_cast<std::uint8_t>(x.failure));
    r.setSeconds(x.seconds);
  });
}

template <>
Result<RewardResultData> decode<RewardResultData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<RewardResultData>(buf, options, Which::REWARD_RESULT, [](auto body) {
    auto r = body.getRewardResult();
    if (!std::isfinite(r.getScore())) invalid("score: must be finite");
    if (r.getHint().size() > kMaxHintBytes) invalid("hint: longer than 1024 bytes");
    if (r.getFailure() >= kInfraFailureCodes) invalid("failure: not an InfraFailure code");
    const auto failure = static_cast<InfraFailure>(r.getFailure());
    if (failure != InfraFailure::none && r.getOk()) invalid("failure: set on a result that says ok");
    if (!(r.getSeconds() >= 0) || !std::isfinite(r.getSeconds())) invalid("seconds: must be finite and not negative");
    return RewardResultData{r.getRequestId(), r.getScore(), r.getOk(), r.getReason().cStr(), r.getHint().cStr(),
                            failure, r.getSeconds()};
  });
}

}  // namespace rlx
