// Where the gateway's HTTP threads and the explorers' decoding meet
// (issue 25; docs/gateway.md). Thread-safe; CAF-free and torch-free.
//
// Turns. An HTTP thread submits a turn (the prompt as token ids, how many
// tokens at most, stop strings, the session it belongs to) and waits on
// it. An explorer takes turns onto its free decoding rows, appends each
// token it samples (id, log-probability, the version that sampled it) and
// finishes the turn with the whole row (every token's routes too). A turn
// nobody finishes is failed when the hub closes, never left waiting; a
// turn its client gave up on is cancelled and the explorer ends its row.
//
// Sessions. Opened with a task id and (when groups have more than one
// member) a group id; each turn's prompt must extend the session's tokens
// so far (its prompts and completions). Text cannot carry the eos that
// ended a completion, so a prompt that extends the tokens without that
// final eos is taken as extending them, and the eos leaves the trajectory
// (every later token is then conditioned on exactly what the sampler
// saw). A prompt that does not extend them (the harness rewrote history)
// is counted in `prefix_mismatch` and the trajectory starts again from
// that turn: what came before is dropped, never trained misaligned. A
// reward closes the session; its trajectory (prompt and observation tokens
// context, completion tokens the policy's) waits for its group. A session
// idle past the timeout is lost: counted, never trained, and its group
// (whose advantages it would bias) is dropped with it when the group ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

// Tokens a row decoded: its prompt, then what was sampled (per token: the
// policy chose it or not, its behaviour log-probability, the version that
// sampled it) and every token's routes ([tokens, route_width], token-major).
struct TokenTrace {
  std::vector<std::int64_t> tokens;
  std::vector<std::uint8_t> generated;
  std::vector<float> log_probs;
  std::vector<std::int64_t> versions;
  std::vector<std::int64_t> routes;
  std::size_t route_width = 0;
  std::size_t size() const { return tokens.size(); }
  // Keeps the first n tokens.
  void truncate(std::size_t n);
  // Appends tokens [from, other.size()) of `other`.
  void append(const TokenTrace& other, std::size_t from);
};

// A session closed with its reward: one row for the learner.
struct GatewayTrajectory {
  std::string task_id;
  std::uint64_t session = 0;
  float reward = 0;
  InfraFailure failure = InfraFailure::none;  // harness_failed: masked, not trained
  std::int64_t prompt_length = 0;              // tokens before the first the policy sampled
  TokenTrace trace;
};

struct TurnSpec {
  std::vector<std::int64_t> prompt;
  std::int64_t max_tokens = 16;
  std::vector<std::string> stop;
  std::uint64_t session = 0;  // 0: none
};

// One completion under way. The hub and the decoding side write it; the
// HTTP thread that submitted it reads it.
class GatewayTurn {
 public:
  explicit GatewayTurn(TurnSpec spec) : spec_(std::move(spec)) {}
  const TurnSpec& spec() const { return spec_; }

  // What the HTTP side sees: the tokens so far and, once done, how it ended.
  struct View {
    std::vector<std::int64_t> ids;
    std::vector<float> log_probs;
    std::vector<std::int64_t> versions;
    bool done = false;
    std::string finish_reason;  // "stop" | "length" (done, no error)
    std::string text;           // the completion's text, cut at a stop string (done)
    std::string error;          // done without a completion: why
  };
  // Waits until more than `seen` tokens are in, or the turn is done, or
  // `deadline`; returns what is there.
  View wait(std::size_t seen, std::chrono::steady_clock::time_point deadline) const;
  // The client gave up: the explorer ends the row at its next step.
  void cancel();
  bool cancelled() const;

  // The decoding side.
  void append(std::int64_t id, float log_prob, std::int64_t version);
  void complete(std::string finish_reason, std::string text);
  void fail(std::string why);

 private:
  TurnSpec spec_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  View view_;
  bool cancelled_ = false;
};

struct GatewayHubOptions {
  std::int64_t group_size = 1;                        // sessions per group (> 1: open needs a group id)
  std::chrono::seconds session_timeout{600};          // idle this long: lost
  std::size_t max_queued_turns = 1024;                // more waiting: refused (busy)
  std::size_t max_open_sessions = 65536;
};

struct GatewayCounts {
  std::uint64_t turns = 0, turns_done = 0, turns_failed = 0, turns_cancelled = 0, busy = 0;
  std::uint64_t sessions_opened = 0, sessions_rewarded = 0, sessions_failed = 0, sessions_lost = 0;
  std::uint64_t prefix_mismatch = 0, eos_dropped = 0;
  std::uint64_t groups_ready = 0, groups_dropped = 0, trajectories_taken = 0;
  GatewayCounts& operator+=(const GatewayCounts& o);
};

// The counts as they cross nodes (a member node's hub, asked by the
// head's heartbeat): every field in the order above. A vector of another
// length is refused (a node of another build).
std::vector<std::uint64_t> gateway_counts_vector(const GatewayCounts& c);
Result<GatewayCounts> gateway_counts_from(const std::vector<std::uint64_t>& v);

class GatewayHub {
 public:
  explicit GatewayHub(GatewayHubOptions options = {});

  // Sessions. open(): the new session's id (> 0). reward(): closes it
  // (`harness_failed`: the outcome is unknown, the row is masked).
  Result<std::uint64_t> open(const std::string& task_id, const std::string& group);
  Result<void> reward(std::uint64_t session, float reward, bool harness_failed);

  // An HTTP thread's turn, queued for the explorers. Refused when the hub
  // is closed or too many turns wait (Errc::busy), or the session is
  // unknown (not_found) or has a turn under way (refused).
  Result<std::shared_ptr<GatewayTurn>> submit(TurnSpec spec);

  // The decoding side: up to `max` turns, waiting up to `wait` for one.
  std::vector<std::shared_ptr<GatewayTurn>> take_turns(std::size_t max, std::chrono::milliseconds wait);
  // A turn's row is done: `trace` the whole row (prompt first).
  // `cancelled`: its client gave up (nothing joins the session).
  void finished(const std::shared_ptr<GatewayTurn>& turn, const TokenTrace& trace, std::string finish_reason,
                std::string text);
  void abandoned(const std::shared_ptr<GatewayTurn>& turn, const std::string& why);

  // Whole groups of closed sessions, in the order they completed, once at
  // least `min_rows` rows are ready (else none); at most `max_rows` rows.
  std::vector<GatewayTrajectory> take_groups(std::size_t min_rows, std::size_t max_rows);
  std::size_t ready_rows() const;

  // Sessions idle since before now - timeout are lost.
  void expire(std::chrono::steady_clock::time_point now);
  // Fails every turn not done (queued, or on a row: a row finishing one
  // later changes nothing); later submits are refused.
  void close(const std::string& why);
  bool closed() const;

  GatewayCounts counts() const;
  std::size_t open_sessions() const;
  const GatewayHubOptions& options() const { return options_; }

 private:
  struct Group {
    std::string name;  // the group id ("" none)
    std::int64_t members = 0, ended = 0;
    bool dropped = false;
    std::vector<GatewayTrajectory> closed;
  };
  struct Session {
    std::string task_id;
    std::uint64_t group = 0;
    TokenTrace trace;
    bool turn_under_way = false;
    std::chrono::steady_clock::time_point touched;
  };
  void end_session(std::map<std::uint64_t, Session>::iterator it, std::optional<GatewayTrajectory> row);

  GatewayHubOptions options_;
  mutable std::mutex mu_;
  std::condition_variable queued_;
  std::deque<std::shared_ptr<GatewayTurn>> queue_;
  std::set<std::shared_ptr<GatewayTurn>> on_rows_;  // taken, not finished
  std::map<std::uint64_t, Session> sessions_;
  std::map<std::uint64_t, Group> groups_;           // by group number
  std::map<std::string, std::uint64_t> group_of_;   // a group id's group still taking members
  std::deque<std::vector<GatewayTrajectory>> ready_;
  std::size_t ready_rows_ = 0;
  std::uint64_t next_session_ = 1, next_group_ = 1;
  bool closed_ = false;
  std::string closed_why_;
  GatewayCounts counts_;
};

}  // namespace rlx
