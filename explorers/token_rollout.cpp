#include "explorers/token_rollout.hpp"

#include "core/clock.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/edit_names.hpp"
#include "explorers/agent_batch.hpp"
#include "explorers/agent_pool.hpp"
#include "explorers/gateway_rows.hpp"
#include "explorers/token_eval.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/token_sampler.hpp"
#include "policy/token_segment.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

struct TokenRollout::Impl {
  MoETransformer model{nullptr};
  std::mt19937_64 rng;
  std::optional<Decoder> decoder;  // single-turn tasks
  std::vector<TokenTask> tasks;    // [B]
  // Workspace episodes: the pool of rows (continuous batching), the
  // sandbox its tools run in, the group of each episode started (by start
  // index), the episodes of groups still open, and finished groups.
  std::optional<AgentPool> agents;
  std::optional<Sandbox> sandbox;
  std::deque<WorkspaceTask> to_start;      // a drawn group's tasks not started yet
  std::vector<std::uint64_t> group_of;     // [start index]
  std::uint64_t groups_drawn = 0;
  std::map<std::uint64_t, std::vector<AgentPool::Finished>> open_groups;
  std::deque<std::vector<AgentPool::Finished>> ready;  // complete groups, in the order they completed
  std::optional<Error> bad_task;           // a drawn task that does not fit policy.max_len
  // Gateway turns: the rows serving them, and the sessions taken for the next segment.
  std::optional<GatewayRows> gateway;
  std::vector<GatewayTrajectory> sessions;
  std::chrono::steady_clock::time_point expired_at;
  std::uint64_t agent_steps = 0, agent_newest = 0;  // since the last segment / the last drop
  SegmentWork work;  // since the last segment taken (or dropped)
  std::shared_ptr<const Tokenizer> tokenizer;
  const Decoder* decoding() const { return decoder ? &*decoder : nullptr; }
};

TokenRollout::TokenRollout(const TokenRolloutOptions& o) : options_(o), impl_(std::make_unique<Impl>()) {
  RLX_REQUIRE(o.rows > 0 && o.rows % o.tokens.group_size == 0, o.rows, o.tokens.group_size);
  impl_->tokenizer = run_tokenizer(o.tokens.tokenizer);
  // Filled by the weight store's first set before any step (the explorer loop waits for it).
  impl_->model = make_unfilled_transformer(run_transformer_options(o.policy, impl_->tokenizer->vocab()),
                                           o.seed + 1000003ull * o.explorer_id);
  impl_->rng.seed(o.seed * 6364136223846793005ull + o.explorer_id + 1);
}

AgentOptions agent_options(const TokensConfig& tokens, bool greedy) {
  AgentOptions a;
  a.sample.max_new_tokens = tokens.max_new_tokens;
  a.sample.temperature = tokens.temperature;
  a.sample.top_p = tokens.top_p;
  a.sample.greedy = greedy;
  a.turn_tokens = tokens.turn_tokens;
  a.limits.max_turns = static_cast<int>(tokens.max_turns);
  a.tokenizer = run_tokenizer(tokens.tokenizer);
  a.sample.rule = decoding_rule(tokens);
  return a;
}

TokenRollout::~TokenRollout() = default;

Result<void> TokenRollout::load_weights(const WeightSetData& w) {
  auto ok = view_weights(*impl_->model, w);  // the set's own bytes: no copy (weights_io.hpp)
  if (ok) version_ = w.version;
  return ok;
}

std::uint64_t TokenRollout::steps_in_segment() const {
  if (options_.kind == "gateway" && options_.gateway && options_.gateway->closed() &&
      (!impl_->gateway || impl_->gateway->busy_rows() == 0))
    return 0;  // the hub is closed: no session can complete a group, nothing in hand can finish (a draining explorer leaves)
  if (options_.kind == "workspace" || options_.kind == "gateway") return impl_->agent_steps;
  const Decoder* d = impl_->decoding();
  return d ? static_cast<std::uint64_t>(d->steps()) : 0;
}

std::uint64_t TokenRollout::episodes_in_hand() const {
  const auto& im = *impl_;
  auto n = static_cast<std::uint64_t>(im.agents ? im.agents->running() : 0);
  for (const auto& [group, members] : im.open_groups) n += members.size();
  for (const auto& members : im.ready) n += members.size();
  return n;
}

std::uint64_t TokenRollout::newest_in_hand() const {
  // Agent rows: the newest version any token in hand may carry. Episodes
  // outlive segments, so this counts from the step after which nothing was
  // in hand (or the last drop), not from the last segment taken.
  if (options_.kind == "workspace") return episodes_in_hand() ? impl_->agent_newest : 0;
  if (options_.kind == "gateway") return impl_->agent_newest;
  const Decoder* d = impl_->decoding();
  return d ? d->newest_version() : 0;
}

std::uint64_t TokenRollout::drop_segment() {
  auto& im = *impl_;
  im.decoder.reset();
  // Every episode under way goes: its tokens were sampled with the weights being dropped.
  im.agents.reset();
  if (im.gateway) im.gateway->abandon_all("the explorer dropped what it held (weights from a head that restarted)");
  im.sessions.clear();
  im.to_start.clear();
  im.group_of.clear();
  im.open_groups.clear();
  im.ready.clear();
  im.agent_steps = im.agent_newest = 0;
  im.work = {};
  return sequence_++;
}

Result<bool> TokenRollout::agent_step() {
  auto& im = *impl_;
  const auto G = options_.tokens.group_size;
  if (!im.agents) {
    if (!im.sandbox) {
      auto sandbox = Sandbox::open();
      if (!sandbox) return make_error(sandbox.error().code, "workspace tools need the sandbox: " + sandbox.error().message);
      im.sandbox.emplace(std::move(*sandbox));
    }
    // A free row takes the next episode of the group under way, or a new
    // group's first: training tasks only (held-out tasks come from
    // templates this never draws; the evaluator's fresh ones lie above heldout_seed()).
    auto next = [this]() -> std::optional<WorkspaceTask> {
      auto& m = *impl_;
      if (m.bad_task) return std::nullopt;
      if (m.to_start.empty()) {
        std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
        auto task = make_workspace_task(TaskSplit::train, draw(m.rng), static_cast<int>(options_.tokens.difficulty));
        const auto prompt = AgentBatch::prompt_tokens(task, *m.tokenizer);
        if (static_cast<std::int64_t>(prompt.size()) + options_.tokens.max_new_tokens > options_.policy.max_len) {
          m.bad_task = make_error(Errc::config_range, "task " + task.id + ": its prompt (" + std::to_string(prompt.size()) +
                                                          " tokens) and max_new_tokens do not fit policy.max_len");
          return std::nullopt;
        }
        for (std::int64_t j = 0; j < options_.tokens.group_size; ++j) m.to_start.push_back(task);
        ++m.groups_drawn;
      }
      m.group_of.push_back(m.groups_drawn - 1);
      auto task = std::move(m.to_start.front());
      m.to_start.pop_front();
      return task;
    };
    im.agents.emplace(im.model, options_.rows, agent_options(options_.tokens, false), *im.sandbox, next);
  }
  if (episodes_in_hand() == 0) im.agent_newest = 0;  // what was in hand all went out in segments
  const auto start = std::chrono::steady_clock::now();
  const double tools_before = im.agents->tool_seconds();
  const auto turns_before = im.agents->turns_ended();
  im.agents->step(im.rng, version_);
  const double tools = im.agents->tool_seconds() - tools_before;
  im.work.tool_s += tools;
  im.work.decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - tools;
  im.work.tool_calls += static_cast<std::uint64_t>(im.agents->turns_ended() - turns_before);
  if (im.bad_task) return *im.bad_task;
  ++im.agent_steps;
  im.agent_newest = std::max(im.agent_newest, version_);
  // A group is complete when all its episodes are: its rows go out together.
  for (auto& f : im.agents->take_finished()) {
    const auto group = im.group_of.at(f.sequence.id);
    auto& members = im.open_groups[group];
    members.push_back(std::move(f));
    if (static_cast<std::int64_t>(members.size()) == G) {
      im.ready.push_back(std::move(members));
      im.open_groups.erase(group);
    }
  }
  return static_cast<std::int64_t>(im.ready.size()) * G >= options_.rows;
}

Result<bool> TokenRollout::gateway_step() {
  auto& im = *impl_;
  if (!options_.gateway) return make_error(Errc::config_missing, "tokens:gateway: this node serves no gateway");
  if (!im.gateway) {
    SampleOptions s;
    s.temperature = options_.tokens.temperature;
    s.top_p = options_.tokens.top_p;
    im.gateway.emplace(im.model, options_.rows, s, im.tokenizer, options_.gateway);
  }
  if (im.agent_steps == 0 && im.gateway->busy_rows() == 0) im.agent_newest = 0;
  const auto start = std::chrono::steady_clock::now();
  // Idle: wait a little for a turn (swaps and drains come between steps).
  if (im.gateway->step(im.rng, version_, std::chrono::milliseconds(20))) {
    im.work.decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++im.agent_steps;
    im.agent_newest = std::max(im.agent_newest, version_);
  }
  if (const auto now = std::chrono::steady_clock::now(); now - im.expired_at > std::chrono::seconds(1)) {
    options_.gateway->expire(now);  // sessions idle past the timeout are lost
    im.expired_at = now;
  }
  // Whole groups of rewarded sessions, `rows` rows of them (explorers on
  // this node share the hub: whoever asks first takes them).
  im.sessions = options_.gateway->take_groups(static_cast<std::size_t>(options_.rows), static_cast<std::size_t>(options_.rows));
  return !im.sessions.empty();
}

Result<bool> TokenRollout::step() {
  auto& im = *impl_;
  deferred_.clear();
  if (options_.kind == "workspace") return agent_step();
  if (options_.kind == "gateway") return gateway_step();
  if (!im.decoder) {
    // A new batch: rows/group tasks, each shown group_size times. Task
    // seeds follow from the rng (so from the run seed and explorer id),
    // below the held-out range the evaluator uses.
    const auto groups = options_.rows / options_.tokens.group_size;
    std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);
    im.tasks.clear();
    std::vector<std::vector<std::int64_t>> prompts;
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      auto task = make_token_task(options_.kind, draw(im.rng));
      if (!task) return task.error();
      const auto ids = im.tokenizer->encode(task->prompt);
      if (static_cast<std::int64_t>(ids.size()) + options_.tokens.max_new_tokens > options_.policy.max_len)
        return make_error(Errc::config_range, "task " + task->id + ": its prompt (" + std::to_string(ids.size()) +
                                                  " tokens) and max_new_tokens do not fit policy.max_len");
      for (std::int64_t j = 0; j < options_.tokens.group_size; ++j) {
        prompts.push_back(ids);
        im.tasks.push_back(*task);
      }
    }
    SampleOptions s;
    s.max_new_tokens = options_.tokens.max_new_tokens;
    s.temperature = options_.tokens.temperature;
    s.top_p = options_.tokens.top_p;
    s.eos = im.tokenizer->eos();
    s.pad = im.tokenizer->pad();
    im.decoder.emplace(im.model, prompts, s);
  }
  const auto start = std::chrono::steady_clock::now();
  auto done = im.decoder->step(im.rng, version_);
  im.work.decode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return done;
}

Segment TokenRollout::take_segment() {
  auto& im = *impl_;
  RLX_REQUIRE(options_.kind == "workspace"  ? static_cast<std::int64_t>(im.ready.size()) * options_.tokens.group_size >= options_.rows
              : options_.kind == "gateway" ? !im.sessions.empty()
                                           : im.decoding() && im.decoding()->done());
  // What each row hands its scorer: a single-turn row its completion, an
  // agent row its episode's changed files (a row whose episode the
  // machinery failed is not scored at all).
  Generation g;
  std::vector<std::string> ids, completions;
  std::vector<InfraFailure> machinery;
  std::vector<float> costs;  // taken from each row's reward before its score is added
  if (options_.kind == "workspace") {
    // The complete groups this segment takes, rows in group order.
    std::vector<Sequence> sequences;
    for (std::int64_t taken = 0; taken < options_.rows; taken += options_.tokens.group_size) {
      for (auto& f : im.ready.front()) {
        ids.push_back(f.episode.task().id);
        completions.push_back(f.episode.payload());
        machinery.push_back(f.episode.failure());
        costs.push_back(static_cast<float>(options_.tokens.bad_call_cost * f.episode.stats().bad_calls));
        sequences.push_back(std::move(f.sequence));
      }
      im.ready.pop_front();
    }
    g = generation_of(sequences, im.model->options().layers, im.model->options().top_k, im.tokenizer->pad());
    im.agent_steps = 0;
  } else if (options_.kind == "gateway") {
    // The harnesses' sessions, rewarded there: nothing to score here.
    std::vector<Sequence> sequences;
    for (auto& t : im.sessions) {
      ids.push_back(t.task_id);
      completions.emplace_back();
      machinery.push_back(t.failure);
      Sequence s;
      s.id = t.session;
      s.prompt_length = t.prompt_length;
      s.tokens = std::move(t.trace.tokens);
      s.generated = std::move(t.trace.generated);
      s.log_probs = std::move(t.trace.log_probs);
      s.versions = std::move(t.trace.versions);
      s.routes = std::move(t.trace.routes);
      sequences.push_back(std::move(s));
    }
    g = generation_of(sequences, im.model->options().layers, im.model->options().top_k, im.tokenizer->pad());
    im.agent_steps = 0;
  } else {
    g = im.decoder->finish();
    im.decoder.reset();
    for (std::size_t b = 0; b < im.tasks.size(); ++b) {
      ids.push_back(im.tasks[b].id);
      completions.push_back(im.tokenizer->decode(completion(g, static_cast<std::int64_t>(b))));
    }
    machinery.assign(ids.size(), InfraFailure::none);
  }
  const auto B = static_cast<std::int64_t>(ids.size());
  std::vector<float> rewards(B, 0.0f);
  for (std::size_t b = 0; b < costs.size(); ++b) rewards[b] = -costs[b];
  std::vector<std::string> hints;
  std::vector<std::optional<RewardResultData>> results(B);  // in_process: each row's outcome
  std::vector<InfraFailure> retried;  // failures met by rows scored again
  const auto scoring = std::chrono::steady_clock::now();
  if (options_.kind == "gateway")
    for (std::int64_t b = 0; b < B; ++b) rewards[b] = im.sessions[static_cast<std::size_t>(b)].reward;
  for (std::int64_t b = 0; b < B; ++b) {
    if (machinery[b] != InfraFailure::none || !options_.in_process) continue;
    RewardRequestData req{static_cast<std::uint64_t>(b), options_.explorer_id, ids[b], completions[b]};
    auto& r = results[b];
    r = options_.in_process->score(req);
    for (int again = 0; again < options_.reward_retries && retryable(r->failure); ++again) {
      retried.push_back(r->failure);
      r = options_.in_process->score(req);
    }
    if (r->ok) rewards[b] += r->score;
    if (r->ok && !r->hint.empty()) hints.resize(B), hints[b] = r->hint;
  }
  const double score_s =  // deferred rows: the reward workers' own time, added when their answers come
      options_.in_process ? std::chrono::duration<double>(std::chrono::steady_clock::now() - scoring).count() : 0.0;
  const std::uint64_t seq = sequence_++;
  Segment s = token_segment(g, rewards, ids, static_cast<std::uint32_t>(options_.tokens.group_size),
                            options_.explorer_id, seq);
  s.tokens->hints = std::move(hints);
  s.created_unix_ns = unix_now_ns();
  s.work = std::exchange(im.work, {});
  s.work.score_s += score_s;
  // A row without an outcome (its episode's sandbox failed, or its scorer
  // could not judge it) is masked and counted, never scored 0.
  for (const auto why : retried) s.count_failure(why);
  s.reward_retries = static_cast<std::uint32_t>(retried.size());
  for (std::int64_t b = 0; b < B; ++b) {
    if (machinery[b] != InfraFailure::none)
      s.mask_episode(0, s.num_steps - 1, static_cast<std::uint32_t>(b), machinery[b]);
    else if (results[b] && !results[b]->ok)
      s.mask_episode(0, s.num_steps - 1, static_cast<std::uint32_t>(b), results[b]->failure);
  }
  im.sessions.clear();
  if (!options_.in_process && options_.kind != "gateway")
    for (std::int64_t b = 0; b < B; ++b)
      if (machinery[b] == InfraFailure::none)
        deferred_.push_back({seq, static_cast<std::uint32_t>(g.prompt_width + g.lengths[b] - 1),
                             static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(b),
                             ids[b] + "\n" + completions[b]});
  return s;
}

}  // namespace rlx
