#include "actors/reward_actor.hpp"

#include <chrono>

#include "actors/guard.hpp"

namespace rlx {

struct RewardState {
  RewardActorOptions options;
  ErrorCounts errors;
};

reward_actor::behavior_type reward_impl(reward_actor::stateful_pointer<RewardState> self, RewardActorOptions options) {
  self->state.options = std::move(options);
  return {
      [self](reward_atom, const WireMsg& msg) -> caf::result<WireMsg> {
        auto& st = self->state;
        auto req = decode_or_count<RewardRequestData>(self, msg, st.errors, st.options.log);
        if (!req) return caf::sec::invalid_argument;
        const auto start = std::chrono::steady_clock::now();
        RewardResultData res = st.options.scorer->score(*req);
        res.request_id = req->request_id;
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return WireMsg{encode(res, st.options.name)};
      },
      [self](counts_atom) { return self->state.errors.total; },
  };
}

reward_actor spawn_reward(caf::actor_system& system, RewardActorOptions options) {
  // Scoring runs in the handler: a code scorer holds a scheduler thread
  // for as long as its program runs (up to the sandbox's wall limit).
  // (A detached actor would not, but CAF 0.17 then waits at shutdown for
  // every handle to it to go, and handles in other actors' options do not.)
  return system.spawn(reward_impl, std::move(options));
}

}  // namespace rlx
