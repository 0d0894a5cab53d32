#include "rollout_log/inspect.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rlx {

Result<LogSummary> summarise_log(const std::filesystem::path& log, const ReadOptions& read, int buckets) {
  LogSummary s;
  auto report = read_log(log, read, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind == LogKind::start) {
      ++s.runs;
      if (e.start.resumed) ++s.resumes;
    } else if (e.kind == LogKind::weights) {
      ++s.versions_published;
      s.last_version = std::max(s.last_version, e.weights.version);
      s.versions[e.weights.version].published = true;
    } else if (e.kind == LogKind::failed_update) {
      // The batch's records said trained; its update failed.
      const auto n = std::min<std::uint64_t>(e.failed_update.segments, s.trained);
      s.trained -= n;
      s.update_failed += n;
      s.drop_reasons["update failed: " + e.failed_update.reason] += n;
    } else {
      const auto& r = e.rollout.record;
      ++s.segments;
      switch (r.verdict) {
        case Verdict::trained: ++s.trained; break;
        case Verdict::dropped_stale: ++s.dropped_stale; break;
        case Verdict::rejected: ++s.rejected; break;
      }
      if (r.verdict != Verdict::trained) ++s.drop_reasons[std::string(to_string(r.verdict)) + ": " + r.reason];
      ++s.versions[r.learner_version].admitted;
      if (r.verdict == Verdict::rejected) return true;
      const Segment& g = e.rollout.segment;
      ++s.lag_segments[r.lag];
      s.env_steps += g.env_steps();
      s.episodes += g.episode_returns.size();
      s.episodes_lost += g.lost_episodes;
      for (auto v : g.policy_versions) s.versions[v].behaviour_steps += g.num_envs;
      auto& x = s.explorers[g.explorer_id];
      ++x.segments;
      x.steps += g.env_steps();
      x.episodes += g.episode_returns.size();
      double sum = 0;
      for (float ret : g.episode_returns) sum += ret;
      x.return_sum += sum;
      if (g.created_unix_ns) {
        if (!s.first_ns || g.created_unix_ns < s.first_ns) s.first_ns = g.created_unix_ns;
        s.last_ns = std::max(s.last_ns, g.created_unix_ns);
      }
      LogSummary::Point p;
      p.t = static_cast<double>(g.created_unix_ns);
      p.episodes = static_cast<int>(g.episode_returns.size());
      p.mean_return = p.episodes ? sum / p.episodes : std::nan("");
      p.lag = r.lag;
      p.verdict = r.verdict;
      s.points.push_back(p);
    }
    return true;
  });
  if (!report) return report.error();
  s.read = std::move(report).value();
  for (auto& p : s.points) p.t = s.first_ns ? (p.t - static_cast<double>(s.first_ns)) * 1e-9 : 0.0;
  const double span = std::max(s.span_s(), 1e-9);
  s.returns_over_time.resize(static_cast<std::size_t>(std::max(1, buckets)));
  std::vector<double> sums(s.returns_over_time.size(), 0.0);
  for (std::size_t i = 0; i < s.returns_over_time.size(); ++i) {
    s.returns_over_time[i].t0 = span * static_cast<double>(i) / static_cast<double>(s.returns_over_time.size());
    s.returns_over_time[i].t1 = span * static_cast<double>(i + 1) / static_cast<double>(s.returns_over_time.size());
  }
  for (const auto& p : s.points) {
    if (!p.episodes) continue;
    auto i = std::min(s.returns_over_time.size() - 1,
                      static_cast<std::size_t>(p.t / span * static_cast<double>(s.returns_over_time.size())));
    s.returns_over_time[i].episodes += static_cast<std::uint64_t>(p.episodes);
    sums[i] += p.mean_return * p.episodes;
  }
  for (std::size_t i = 0; i < sums.size(); ++i)
    if (s.returns_over_time[i].episodes)
      s.returns_over_time[i].mean_return = sums[i] / static_cast<double>(s.returns_over_time[i].episodes);
  return s;
}

namespace {

std::string num(double x) { return std::isfinite(x) ? fmt::format("{:.6g}", x) : "null"; }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", c);
    else out += c;
  }
  return out + "\"";
}

}  // namespace

std::string summary_text(const LogSummary& s) {
  std::string o;
  const auto& r = s.read;
  o += fmt::format("files        {} ({} bytes on disk, {} uncompressed), {} entries\n", r.files, r.stored_bytes, r.bytes,
                   r.entries);
  o += fmt::format("runs         {} ({} resumed)\n", s.runs, s.resumes);
  o += fmt::format("time span    {:.1f} s\n", s.span_s());
  o += fmt::format("segments     {}: trained {}, dropped stale {}, rejected {}{}\n", s.segments, s.trained,
                   s.dropped_stale, s.rejected,
                   s.update_failed ? fmt::format(", update failed {}", s.update_failed) : std::string());
  for (const auto& [why, n] : s.drop_reasons) o += fmt::format("  {:<30} {}\n", why, n);
  o += fmt::format("env steps    {} ({:.1f} bytes per step in the log)\n", s.env_steps,
                   s.env_steps ? static_cast<double>(r.stored_bytes) / static_cast<double>(s.env_steps) : 0.0);
  o += fmt::format("episodes     {} ({} lost to env failures)\n", s.episodes, s.episodes_lost);
  o += "returns over time\n";
  for (const auto& b : s.returns_over_time)
    o += fmt::format("  {:7.1f} - {:7.1f} s  {:>6} episodes  mean {}\n", b.t0, b.t1, b.episodes,
                     b.episodes ? fmt::format("{:.1f}", b.mean_return) : "-");
  o += "lag at admission (segments)\n";
  for (const auto& [lag, n] : s.lag_segments) o += fmt::format("  {:>3}  {}\n", lag, n);
  o += "explorers\n";
  for (const auto& [id, x] : s.explorers)
    o += fmt::format("  {:>3}  {:>6} segments {:>9} steps {:>6} episodes  mean return {}\n", id, x.segments, x.steps,
                     x.episodes, x.episodes ? fmt::format("{:.1f}", x.return_sum / x.episodes) : "-");
  o += fmt::format("versions     {} published, last v{}; env steps chosen by each version", s.versions_published,
                   s.last_version);
  // Every version when few, else 16 equal ranges of versions (--json has them all).
  std::vector<std::pair<std::string, std::uint64_t>> rows;
  const std::uint64_t top = s.versions.empty() ? 0 : s.versions.rbegin()->first;
  const std::uint64_t width = top < 24 ? 1 : (top + 16) / 16;
  for (const auto& [v, x] : s.versions) {
    if (!x.behaviour_steps) continue;
    const std::uint64_t lo = v / width * width, hi = std::min(top, lo + width - 1);
    std::string label = width == 1 ? fmt::format("v{}", lo) : fmt::format("v{}-{}", lo, hi);
    if (rows.empty() || rows.back().first != label) rows.emplace_back(label, 0);
    rows.back().second += x.behaviour_steps;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) o += fmt::format("{}{}:{}", i % 8 == 0 ? "\n  " : " ", rows[i].first, rows[i].second);
  o += "\n";
  for (const auto& p : r.problems) o += fmt::format("{} {}\n", p.fatal ? "bad record:" : "warning:", describe(p));
  return o;
}

std::string summary_json(const LogSummary& s) {
  const auto& r = s.read;
  std::string o = "{";
  o += fmt::format("\"files\":{},\"bytes_on_disk\":{},\"bytes\":{},\"entries\":{},\"runs\":{},\"resumes\":{},", r.files,
                   r.stored_bytes, r.bytes, r.entries, s.runs, s.resumes);
  o += fmt::format("\"time_span_s\":{},\"first_unix_ns\":{},\"last_unix_ns\":{},", num(s.span_s()), s.first_ns, s.last_ns);
  o += fmt::format("\"segments\":{},\"trained\":{},\"dropped_stale\":{},\"rejected\":{},\"update_failed\":{},\"env_steps\":{},",
                   s.segments, s.trained, s.dropped_stale, s.rejected, s.update_failed, s.env_steps);
  o += fmt::format("\"episodes\":{},\"episodes_lost\":{},\"versions_published\":{},\"last_version\":{},", s.episodes,
                   s.episodes_lost, s.versions_published, s.last_version);
  o += "\"drop_reasons\":{";
  bool first = true;
  for (const auto& [why, n] : s.drop_reasons) o += (first ? "" : ",") + json_string(why) + ":" + std::to_string(n), first = false;
  o += "},\"lag_histogram\":{";
  first = true;
  for (const auto& [lag, n] : s.lag_segments) o += fmt::format("{}\"{}\":{}", first ? "" : ",", lag, n), first = false;
  o += "},\"returns_over_time\":[";
  first = true;
  for (const auto& b : s.returns_over_time)
    o += fmt::format("{}{{\"t0\":{},\"t1\":{},\"episodes\":{},\"mean_return\":{}}}", first ? "" : ",", num(b.t0),
                     num(b.t1), b.episodes, b.episodes ? num(b.mean_return) : "null"),
        first = false;
  o += "],\"explorers\":{";
  first = true;
  for (const auto& [id, x] : s.explorers)
    o += fmt::format("{}\"{}\":{{\"segments\":{},\"steps\":{},\"episodes\":{},\"mean_return\":{}}}", first ? "" : ",", id,
                     x.segments, x.steps, x.episodes, x.episodes ? num(x.return_sum / x.episodes) : "null"),
        first = false;
  o += "},\"versions\":{";
  first = true;
  for (const auto& [v, x] : s.versions)
    o += fmt::format("{}\"{}\":{{\"admitted\":{},\"behaviour_steps\":{},\"published\":{}}}", first ? "" : ",", v,
                     x.admitted, x.behaviour_steps, x.published),
        first = false;
  o += "},\"problems\":[";
  first = true;
  for (const auto& p : r.problems)
    o += fmt::format("{}{{\"file\":{},\"offset\":{},\"what\":{},\"fatal\":{}}}", first ? "" : ",",
                     json_string(p.where.file), p.where.offset, json_string(p.what), p.fatal),
        first = false;
  return o + "]}";
}

}  // namespace rlx
