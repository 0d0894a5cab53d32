#include "actors/env_actor.hpp"

#include <memory>

#include "actors/guard.hpp"

namespace rlx {

struct EnvActorState {
  EnvActorOptions options;
  std::unique_ptr<BatchEnv> envs;
  EnvStepResultData result;
  ErrorCounts errors;
};

env_actor::behavior_type env_actor_impl(env_actor::stateful_pointer<EnvActorState> self, EnvActorOptions options) {
  self->state.options = std::move(options);
  auto& st = self->state;
  return {
      [self, &st](reset_atom, const WireMsg& msg) -> caf::result<WireMsg> {
        auto r = decode_or_count<EnvResetData>(self, msg, st.errors, st.options.log);
        if (!r) return caf::sec::invalid_argument;
        if (r->num_envs == 0 || r->num_envs > 65536) {
          st.errors.add(Errc::invalid_field);
          return caf::sec::invalid_argument;
        }
        try {
          st.envs = st.options.factory(r->seed, st.options.first_env_id, static_cast<int>(r->num_envs));
          st.envs->reset(st.result);
        } catch (const EnvFailure& e) {
          st.options.log->error("{}", e.what());
          return to_caf(Error{Errc::env_failed, e.what()});
        }
        return WireMsg{encode(st.result, st.options.name)};
      },
      [self, &st](step_atom, const WireMsg& msg) -> caf::result<WireMsg> {
        auto r = decode_or_count<EnvStepData>(self, msg, st.errors, st.options.log);
        if (!r) return caf::sec::invalid_argument;
        if (!st.envs || static_cast<int>(r->actions.size()) != st.envs->size()) {
          st.errors.add(Errc::invalid_field);
          st.options.log->warn("step before reset or with {} actions", r->actions.size());
          return caf::sec::invalid_argument;
        }
        for (auto a : r->actions)
          if (a < 0 || a >= st.envs->spec().num_actions) {
            st.errors.add(Errc::invalid_field);
            return caf::sec::invalid_argument;
          }
        try {
          st.envs->step(r->actions, st.result);
        } catch (const EnvFailure& e) {
          st.options.log->error("{}", e.what());
          return to_caf(Error{Errc::env_failed, e.what()});
        }
        st.result.step_index = r->step_index;
        return WireMsg{encode(st.result, st.options.name)};
      },
      [&st](counts_atom) { return st.errors.total; },
  };
}

env_actor spawn_env(caf::actor_system& system, EnvActorOptions options) {
  return system.spawn(env_actor_impl, std::move(options));
}

}  // namespace rlx
