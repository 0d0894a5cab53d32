// Agent episodes decoded with continuous batching (explorers/agent_pool.hpp)
// against the lockstep batch (explorers/agent_batch.hpp), on the same
// tasks, the same policy and the same rows: decoding utilisation (rows
// that held an episode / rows stepped), sampled tokens/s and episodes/s.
// The policy is examples/agent.toml's shape from its [policy] init when
// set (RLX_BENCH_AGENT_CONFIG names another config): a policy that plays
// episodes of uneven length, as a supervised start does; random weights
// play every episode to its budget and show little difference.
#include <fmt/format.h>

#include <cstdlib>
#include <algorithm>

#include "bench/common.hpp"
#include "envs/code/sandbox.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/env.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/agent_pool.hpp"
#include "explorers/token_eval.hpp"
#include "learner/start_weights.hpp"
#include "explorers/token_rollout.hpp"
#include "policy/hf_checkpoint.hpp"

namespace rlx {

namespace {

struct Pace {
  double seconds = 0, tool_seconds = 0;
  std::int64_t busy = 0, stepped = 0, sampled = 0, episodes = 0;
  double utilisation() const { return stepped ? static_cast<double>(busy) / static_cast<double>(stepped) : 0; }
  double tokens_per_s() const { return static_cast<double>(sampled) / seconds; }
  double episodes_per_s() const { return static_cast<double>(episodes) / seconds; }
};

std::int64_t sampled_in(const Generation& g) { return g.generated.sum().item<std::int64_t>(); }

}  // namespace

std::vector<Row> bench_agent() {
  const char* env_config = std::getenv("RLX_BENCH_AGENT_CONFIG");
  const std::string path = env_config ? env_config : "examples/agent.toml";
  auto config = load_config(path, builtin_envs().names());
  if (!config) return {{"agent rows: continuous vs lockstep", "skipped", "", "", config.error().message}};
  const auto tokenizer = run_tokenizer(config->tokens.tokenizer);
  auto model = make_seeded_transformer(run_transformer_options(config->policy, tokenizer->vocab()), 1);
  if (!config->policy.init.empty()) {
    const auto read = load_start_weights(model, config->policy.init);
    RLX_REQUIRE(read.ok(), "[policy] init: " + read.error().message);
  }
  auto sandbox = Sandbox::open();
  if (!sandbox) return {{"agent rows: continuous vs lockstep", "skipped", "", "", sandbox.error().message}};
  const auto agent = agent_options(config->tokens, false);
  const std::int64_t rows = 8, tasks = 32;
  // Prompt and observation tokens a row feeds at one step (RLX_BENCH_AGENT_CHUNK).
  const char* env_chunk = std::getenv("RLX_BENCH_AGENT_CHUNK");
  const std::int64_t chunk = env_chunk ? std::max(1, std::atoi(env_chunk)) : 8;
  std::vector<WorkspaceTask> all;
  for (std::int64_t i = 0; i < tasks; ++i)
    all.push_back(make_workspace_task(TaskSplit::train, heldout_seed() + 1000 + static_cast<std::uint64_t>(i),
                                      static_cast<int>(config->tokens.difficulty)));

  Pace lock;
  {
    std::mt19937_64 rng(1);
    const auto t = Clock::now();
    for (std::int64_t first = 0; first < tasks; first += rows) {
      AgentBatch batch(model, {all.begin() + first, all.begin() + first + rows}, agent, *sandbox);
      while (!batch.step(rng, 1)) {
      }
      lock.sampled += sampled_in(batch.finish());
      lock.busy += batch.rows_busy();
      lock.stepped += batch.rows_stepped();
      lock.tool_seconds += batch.tool_seconds();
      lock.episodes += rows;
    }
    lock.seconds = seconds_since(t);
  }
  Pace pool;
  {
    // As an explorer runs: a task for every free row, the same tasks first,
    // until as many episodes have finished (no tail of idle rows at the end).
    std::mt19937_64 rng(1);
    std::uint64_t drawn = 0;
    AgentPool p(model, rows, agent, *sandbox, [&]() -> std::optional<WorkspaceTask> {
      return make_workspace_task(TaskSplit::train, heldout_seed() + 1000 + drawn++, static_cast<int>(config->tokens.difficulty));
    }, chunk);
    const auto t = Clock::now();
    while (pool.episodes < tasks && p.step(rng, 1)) pool.episodes += static_cast<std::int64_t>(p.take_finished().size());
    pool.seconds = seconds_since(t);
    pool.busy = p.rows_busy();
    pool.stepped = p.rows_stepped();
    pool.sampled = p.sampled_tokens();
    pool.tool_seconds = p.tool_seconds();
  }
  const auto note = fmt::format("{} episodes, {} rows, chunk {}, {}{}", tasks, rows, chunk, path,
                                config->policy.init.empty() ? " (random weights)" : " init " + config->policy.init);
  return {
      {"agent rows: decoding utilisation, continuous vs lockstep", fmt::format("{:.2f}", pool.utilisation()),
       fmt::format("{:.2f}", lock.utilisation()), fmt::format("{:.2f}", pool.utilisation() / lock.utilisation()), note},
      {"agent rows: sampled tokens/s, continuous vs lockstep", fmt::format("{:.0f}", pool.tokens_per_s()),
       fmt::format("{:.0f}", lock.tokens_per_s()), fmt::format("{:.2f}", pool.tokens_per_s() / lock.tokens_per_s()),
       fmt::format("{} vs {} tokens sampled; tools {:.0f} s vs {:.0f} s of {:.0f} s vs {:.0f} s", pool.sampled,
                   lock.sampled, pool.tool_seconds, lock.tool_seconds, pool.seconds, lock.seconds)},
      {"agent rows: episodes/s, continuous vs lockstep", fmt::format("{:.3f}", pool.episodes_per_s()),
       fmt::format("{:.3f}", lock.episodes_per_s()), fmt::format("{:.2f}", pool.episodes_per_s() / lock.episodes_per_s()),
       fmt::format("{} episodes each", pool.episodes)},
  };
}

}  // namespace rlx
