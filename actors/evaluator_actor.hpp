// The evaluator: scores the token policy's published versions on the
// held-out tasks (explorers/token_eval.hpp: greedy pass@1, never trained
// on) and reports each score to the coordinator, which shows it in the
// status line and metrics.jsonl. It subscribes to the weight store like
// an explorer; while it scores one version, newer ones only raise the
// mark, and it scores the newest next once `eval_every` versions have
// passed (the first version it hears of, the starting point, always).
// Evaluation is compute on this actor's thread (seconds); no other actor
// waits for it.
#pragma once

#include "actors/interfaces.hpp"
#include "messages/codec.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "envs/scorer.hpp"

namespace rlx {

struct EvaluatorOptions {
  std::string kind = "code";         // token task kind
  PolicyConfig policy;
  TokensConfig tokens;
  std::shared_ptr<const Scorer> scorer;
  weight_store_actor weight_store;
  coordinator_actor coordinator;
  std::chrono::milliseconds request_timeout{30000};
  Logger log;
  DecodeOptions weights{};  // a weight set's limits ([weight_store] max_set_mb)
};

evaluator_actor spawn_evaluator(caf::actor_system& system, EvaluatorOptions options);

}  // namespace rlx
