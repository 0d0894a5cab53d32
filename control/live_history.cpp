#include "control/live_history.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rlx {

const std::vector<std::string>& LiveHistory::curve_names() {
  static const std::vector<std::string> names = {"time_s",     "env_steps",  "steps_per_s", "tokens_per_s",
                                                 "mean_return", "pass_at_1", "lag_mean",    "lag_max",
                                                 "policy_loss", "value_loss", "entropy"};
  return names;
}

LiveHistory::LiveHistory(std::string run_name, std::size_t max_points)
    : run_name_(std::move(run_name)), max_points_(max_points < 4 ? 4 : max_points),
      curves_(curve_names().size() - 1) {}

void LiveHistory::add(const MetricsData& m, const RunCounts& r) {
  std::lock_guard lock(mu_);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double steps = static_cast<double>(m.env_steps), tokens = static_cast<double>(m.policy_tokens);
  const double dt = r.time_s - last_time_s_;
  // Rates over the interval since the previous report (none for the first).
  const double steps_per_s = reports_ > 0 && dt > 0 ? (steps - last_env_steps_) / dt : nan;
  const double tokens_per_s = reports_ > 0 && dt > 0 && m.policy_tokens > 0 ? (tokens - last_tokens_) / dt : nan;
  last_time_s_ = r.time_s;
  last_env_steps_ = steps;
  last_tokens_ = tokens;
  ++reports_;

  const double values[] = {steps,
                           steps_per_s,
                           tokens_per_s,
                           m.episodes > 0 ? static_cast<double>(m.mean_return) : nan,
                           r.eval.any ? r.eval.pass_at_1 : nan,
                           m.lag_mean,
                           static_cast<double>(m.lag_max),
                           m.updates > 0 ? static_cast<double>(m.policy_loss) : nan,
                           m.updates > 0 ? static_cast<double>(m.value_loss) : nan,
                           m.updates > 0 ? static_cast<double>(m.entropy) : nan};
  static_assert(std::size(values) + 1 == 11);
  time_s_.push_back(r.time_s);
  for (std::size_t c = 0; c < curves_.size(); ++c) curves_[c].push_back(values[c]);
  if (time_s_.size() > max_points_) thin();

  latest_ = metrics_json_line(m, r);
  if (!latest_.empty() && latest_.back() == '\n') latest_.pop_back();
  by_explorer_ = "{";
  for (const auto& [explorer, n] : m.segments_by_explorer)
    by_explorer_ += fmt::format("{}\"{}\":{}", by_explorer_.size() > 1 ? "," : "", explorer, n);
  by_explorer_ += "}";
}

void LiveHistory::thin() {
  // Every other point of all but the newest, which stays.
  auto halve = [](std::vector<double>& v) {
    std::vector<double> kept;
    kept.reserve(v.size() / 2 + 1);
    for (std::size_t i = 0; i + 1 < v.size(); i += 2) kept.push_back(v[i]);
    kept.push_back(v.back());
    v = std::move(kept);
  };
  halve(time_s_);
  for (auto& c : curves_) halve(c);
}

void LiveHistory::ended(const std::string& outcome, const std::string& summary) {
  std::lock_guard lock(mu_);
  outcome_ = outcome;
  summary_ = summary;
}

namespace {

// A JSON string; bytes that are not UTF-8 become U+FFFD (a run name or a
// summary quoting a file name must not break the page).
std::string live_json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::size_t LiveHistory::points() const {
  std::lock_guard lock(mu_);
  return time_s_.size();
}

std::string LiveHistory::json() const {
  std::lock_guard lock(mu_);
  std::string out = "{\"run\":" + live_json_string(run_name_) + ",\"reports\":" + std::to_string(reports_);
  out += ",\"ended\":";
  out += outcome_.empty() ? "null" : "{\"outcome\":" + live_json_string(outcome_) + ",\"summary\":" + live_json_string(summary_) + "}";
  out += ",\"latest\":" + (latest_.empty() ? std::string("null") : latest_);
  out += ",\"by_explorer\":" + (by_explorer_.empty() ? std::string("{}") : by_explorer_);
  out += ",\"series\":{";
  const auto& names = curve_names();
  for (std::size_t c = 0; c < names.size(); ++c) {
    const auto& v = c == 0 ? time_s_ : curves_[c - 1];
    out += fmt::format("{}\"{}\":[", c ? "," : "", names[c]);
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_number(v[i]);
    out += "]";
  }
  out += "}}";
  return out;
}

}  // namespace rlx
