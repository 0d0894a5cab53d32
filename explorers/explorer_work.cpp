#include "explorers/explorer_work.hpp"

namespace rlx {

ExplorerWork::ExplorerWork(const ExplorerWorkOptions& options) : options_(options) {
  if (options_.tokens) tokens_ = std::make_unique<TokenRollout>(*options_.tokens);
  else rollout_ = std::make_unique<Rollout>(options_.rollout);
}

ExplorerWork::~ExplorerWork() = default;

SegmentSource& ExplorerWork::source() {
  if (tokens_) return *tokens_;
  return *rollout_;
}

Result<bool> ExplorerWork::start_here() {
  if (tokens_) return false;
  try {
    local_ = options_.local_env(options_.env_seed, options_.first_env_id, static_cast<int>(options_.rollout.num_envs));
    local_->reset(local_result_);
  } catch (const EnvFailure& e) {
    return make_error(Errc::env_failed, e.what());
  }
  return true;
}

Result<void> ExplorerWork::begin_step_here() {
  if (tokens_) return {};
  const auto& actions = rollout_->act(obs_);
  try {
    local_->step(actions, local_result_);
  } catch (const EnvFailure& e) {
    return make_error(Errc::env_failed, e.what());
  }
  return {};
}

EnvResetData ExplorerWork::reset_request() const {
  return EnvResetData{options_.env_seed, static_cast<std::uint32_t>(options_.rollout.num_envs)};
}

EnvStepData ExplorerWork::step_request() { return EnvStepData{rollout_->act(obs_), ++step_index_}; }

Result<WorkStep> ExplorerWork::observe(const EnvStepResultData& r, bool started) {
  if (static_cast<std::int64_t>(r.rewards.size()) != options_.rollout.num_envs ||
      static_cast<std::int64_t>(r.obs_dim) != options_.rollout.obs_dim)
    return make_error(Errc::env_failed, "the env answered with a step result of the wrong shape");
  WorkStep out;
  if (started) {
    const bool complete = rollout_->observe(r);
    out.deferred = rollout_->deferred();
    if (complete) out.segment = rollout_->take_segment();
  }
  obs_ = r.observations;
  return out;
}

Result<WorkStep> ExplorerWork::token_step() {
  auto complete = tokens_->step();
  if (!complete) return complete.error();
  WorkStep out;
  if (*complete) {
    out.segment = tokens_->take_segment();
    out.deferred = tokens_->deferred();
  }
  return out;
}

}  // namespace rlx
