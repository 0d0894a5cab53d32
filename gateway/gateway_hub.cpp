#include "gateway/gateway_hub.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace rlx {

namespace {

// Every field of GatewayCounts, in its order: one list for +=, to and from a vector.
template <class F>
void each_gateway_count(GatewayCounts& c, F&& f) {
  for (std::uint64_t* x : {&c.turns, &c.turns_done, &c.turns_failed, &c.turns_cancelled, &c.busy, &c.sessions_opened,
                           &c.sessions_rewarded, &c.sessions_failed, &c.sessions_lost, &c.prefix_mismatch,
                           &c.eos_dropped, &c.groups_ready, &c.groups_dropped, &c.trajectories_taken})
    f(*x);
}
constexpr std::size_t kGatewayCountFields = 14;
static_assert(sizeof(GatewayCounts) == kGatewayCountFields * sizeof(std::uint64_t), "each_gateway_count lists every field");

}  // namespace

GatewayCounts& GatewayCounts::operator+=(const GatewayCounts& o) {
  auto other = gateway_counts_vector(o);
  std::size_t i = 0;
  each_gateway_count(*this, [&](std::uint64_t& x) { x += other[i++]; });
  return *this;
}

std::vector<std::uint64_t> gateway_counts_vector(const GatewayCounts& c) {
  std::vector<std::uint64_t> v;
  auto copy = c;
  each_gateway_count(copy, [&](std::uint64_t& x) { v.push_back(x); });
  return v;
}

Result<GatewayCounts> gateway_counts_from(const std::vector<std::uint64_t>& v) {
  if (v.size() != kGatewayCountFields)
    return make_error(Errc::malformed_message,
                      fmt::format("gateway counts: {} numbers, not {}", v.size(), kGatewayCountFields));
  GatewayCounts c;
  std::size_t i = 0;
  each_gateway_count(c, [&](std::uint64_t& x) { x = v[i++]; });
  return c;
}

void TokenTrace::truncate(std::size_t n) {
  n = std::min(n, tokens.size());
  tokens.resize(n);
  generated.resize(n);
  log_probs.resize(n);
  versions.resize(n);
  routes.resize(n * route_width);
}

void TokenTrace::append(const TokenTrace& o, std::size_t from) {
  if (tokens.empty()) route_width = o.route_width;
  for (std::size_t i = from; i < o.size(); ++i) {
    tokens.push_back(o.tokens[i]);
    generated.push_back(o.generated[i]);
    log_probs.push_back(o.log_probs[i]);
    versions.push_back(o.versions[i]);
  }
  if (from < o.size())
    routes.insert(routes.end(), o.routes.begin() + static_cast<std::ptrdiff_t>(from * o.route_width), o.routes.end());
}

GatewayTurn::View GatewayTurn::wait(std::size_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  changed_.wait_until(lock, deadline, [&] { return view_.done || view_.ids.size() > seen; });
  return view_;
}

void GatewayTurn::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool GatewayTurn::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void GatewayTurn::append(std::int64_t id, float log_prob, std::int64_t version) {
  std::lock_guard lock(mu_);
  view_.ids.push_back(id);
  view_.log_probs.push_back(log_prob);
  view_.versions.push_back(version);
  changed_.notify_all();
}

void GatewayTurn::complete(std::string finish_reason, std::string text) {
  std::lock_guard lock(mu_);
  if (view_.done) return;
  view_.done = true;
  view_.finish_reason = std::move(finish_reason);
  view_.text = std::move(text);
  changed_.notify_all();
}

void GatewayTurn::fail(std::string why) {
  std::lock_guard lock(mu_);
  if (view_.done) return;
  view_.done = true;
  view_.error = std::move(why);
  changed_.notify_all();
}

GatewayHub::GatewayHub(GatewayHubOptions options) : options_(std::move(options)) {
  RLX_REQUIRE(options_.group_size >= 1, options_.group_size);
}

Result<std::uint64_t> GatewayHub::open(const std::string& task_id, const std::string& group) {
  std::lock_guard lock(mu_);
  if (closed_) return make_error(Errc::busy, "the gateway is closing: " + closed_why_);
  if (options_.group_size > 1 && group.empty())
    return make_error(Errc::invalid_field, fmt::format("`group_id` is required: this run compares sessions in groups of {}",
                                                       options_.group_size));
  if (sessions_.size() >= options_.max_open_sessions)
    return make_error(Errc::busy, fmt::format("{} sessions are open already (the most allowed)", sessions_.size()));
  // The group id's group while it takes members; a full one makes way for a new group of that id.
  std::uint64_t number = 0;
  auto named = group.empty() ? group_of_.end() : group_of_.find(group);
  if (named != group_of_.end()) number = named->second;
  if (number == 0 || groups_[number].members >= options_.group_size) {
    number = next_group_++;
    groups_[number] = Group{};
    groups_[number].name = group;
    if (!group.empty()) group_of_[group] = number;
  }
  auto& g = groups_[number];
  ++g.members;
  if (g.members >= options_.group_size && !group.empty()) group_of_.erase(group);
  const auto id = next_session_++;
  sessions_[id] = Session{task_id, number, {}, false, std::chrono::steady_clock::now()};
  ++counts_.sessions_opened;
  return id;
}

void GatewayHub::end_session(std::map<std::uint64_t, Session>::iterator it, std::optional<GatewayTrajectory> row) {
  const auto number = it->second.group;
  sessions_.erase(it);
  auto& g = groups_[number];
  ++g.ended;
  if (row) {
    g.closed.push_back(std::move(*row));
  } else if (!g.dropped) {
    // A lost member dooms its group: it takes no one new, and goes once its members have ended.
    g.dropped = true;
    if (auto named = group_of_.find(g.name); named != group_of_.end() && named->second == number) group_of_.erase(named);
  }
  if (g.ended < (g.dropped ? g.members : options_.group_size)) return;
  if (g.dropped) {
    ++counts_.groups_dropped;
  } else {
    ++counts_.groups_ready;
    ready_rows_ += g.closed.size();
    ready_.push_back(std::move(g.closed));
  }
  groups_.erase(number);
}

Result<void> GatewayHub::reward(std::uint64_t session, float reward, bool harness_failed) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return make_error(Errc::not_found, fmt::format("no open session {}", session));
  auto& s = it->second;
  if (s.turn_under_way) return make_error(Errc::refused, fmt::format("session {} has a turn under way", session));
  const auto first = std::find(s.trace.generated.begin(), s.trace.generated.end(), std::uint8_t{1});
  if (first == s.trace.generated.end())
    return make_error(Errc::refused, fmt::format("session {} has no completion to reward", session));
  GatewayTrajectory row;
  row.task_id = s.task_id;
  row.session = session;
  row.reward = reward;
  row.failure = harness_failed ? InfraFailure::harness_failed : InfraFailure::none;
  row.prompt_length = first - s.trace.generated.begin();
  row.trace = std::move(s.trace);
  ++(harness_failed ? counts_.sessions_failed : counts_.sessions_rewarded);
  end_session(it, std::move(row));
  return {};
}

Result<std::shared_ptr<GatewayTurn>> GatewayHub::submit(TurnSpec spec) {
  std::lock_guard lock(mu_);
  if (closed_) return make_error(Errc::busy, "the gateway is closing: " + closed_why_);
  if (queue_.size() >= options_.max_queued_turns) {
    ++counts_.busy;
    return make_error(Errc::busy, fmt::format("{} turns wait already: ask again later", queue_.size()));
  }
  if (spec.session != 0) {
    auto it = sessions_.find(spec.session);
    if (it == sessions_.end()) return make_error(Errc::not_found, fmt::format("no open session {}", spec.session));
    auto& s = it->second;
    if (s.turn_under_way)
      return make_error(Errc::refused, fmt::format("session {} has a turn under way: one at a time", spec.session));
    auto& t = s.trace.tokens;
    const auto& p = spec.prompt;
    const auto extends = [&](std::size_t n) { return p.size() >= n && std::equal(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n), p.begin()); };
    if (extends(t.size())) {
    } else if (!t.empty() && s.trace.generated.back() && extends(t.size() - 1)) {
      s.trace.truncate(t.size() - 1);  // the eos text could not carry
      ++counts_.eos_dropped;
    } else {
      s.trace = {};  // the harness rewrote history: the trajectory starts again here
      ++counts_.prefix_mismatch;
    }
    s.turn_under_way = true;
    s.touched = std::chrono::steady_clock::now();
  }
  auto turn = std::make_shared<GatewayTurn>(std::move(spec));
  queue_.push_back(turn);
  ++counts_.turns;
  queued_.notify_one();
  return turn;
}

std::vector<std::shared_ptr<GatewayTurn>> GatewayHub::take_turns(std::size_t max, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (max == 0) return {};
  queued_.wait_for(lock, wait, [&] { return !queue_.empty() || closed_; });
  std::vector<std::shared_ptr<GatewayTurn>> out;
  while (!queue_.empty() && out.size() < max) {
    on_rows_.insert(queue_.front());
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return out;
}

void GatewayHub::finished(const std::shared_ptr<GatewayTurn>& turn, const TokenTrace& trace, std::string finish_reason,
                          std::string text) {
  {
    std::lock_guard lock(mu_);
    if (!on_rows_.erase(turn)) return;  // failed by close() already
    const bool cancelled = turn->cancelled();
    ++(cancelled ? counts_.turns_cancelled : counts_.turns_done);
    auto it = sessions_.find(turn->spec().session);
    if (turn->spec().session != 0 && it != sessions_.end()) {
      auto& s = it->second;
      s.turn_under_way = false;
      s.touched = std::chrono::steady_clock::now();
      // The session's tokens are a prefix of the row's (checked at submit);
      // a turn its client never saw joins nothing.
      if (!cancelled) s.trace.append(trace, s.trace.size());
    }
  }
  turn->complete(std::move(finish_reason), std::move(text));
}

void GatewayHub::abandoned(const std::shared_ptr<GatewayTurn>& turn, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (!on_rows_.erase(turn)) return;  // failed by close() already
    ++counts_.turns_failed;
    auto it = sessions_.find(turn->spec().session);
    if (turn->spec().session != 0 && it != sessions_.end()) it->second.turn_under_way = false;
  }
  turn->fail(why);
}

std::vector<GatewayTrajectory> GatewayHub::take_groups(std::size_t min_rows, std::size_t max_rows) {
  std::lock_guard lock(mu_);
  std::vector<GatewayTrajectory> out;
  if (ready_rows_ < std::max<std::size_t>(min_rows, 1)) return out;
  while (!ready_.empty() && out.size() + ready_.front().size() <= max_rows) {
    for (auto& row : ready_.front()) out.push_back(std::move(row));
    ready_rows_ -= ready_.front().size();
    ready_.pop_front();
  }
  counts_.trajectories_taken += out.size();
  return out;
}

std::size_t GatewayHub::ready_rows() const {
  std::lock_guard lock(mu_);
  return ready_rows_;
}

void GatewayHub::expire(std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto next = std::next(it);
    if (!it->second.turn_under_way && now - it->second.touched > options_.session_timeout) {
      ++counts_.sessions_lost;
      end_session(it, std::nullopt);
    }
    it = next;
  }
}

void GatewayHub::close(const std::string& why) {
  std::deque<std::shared_ptr<GatewayTurn>> queued;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    closed_why_ = why;
    queued.swap(queue_);
    queued.insert(queued.end(), on_rows_.begin(), on_rows_.end());
    on_rows_.clear();
    counts_.turns_failed += queued.size();
    for (const auto& t : queued)
      if (auto it = sessions_.find(t->spec().session); it != sessions_.end()) it->second.turn_under_way = false;
    queued_.notify_all();
  }
  for (const auto& t : queued) t->fail(why);
}

bool GatewayHub::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

GatewayCounts GatewayHub::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::size_t GatewayHub::open_sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace rlx
