// gnuplot drawings of a rollout log and of a run's metrics.jsonl.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "rollout_log/inspect.hpp"

namespace rlx {

namespace fs = std::filesystem;

namespace {

// Runs gnuplot on `script`; the data files live in a temporary directory.
Result<void> run_gnuplot(const std::string& script, const fs::path& png) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0)
    return make_error(Errc::not_found, "gnuplot not found: install Debian's gnuplot-nox (tools/install-deps.sh does)");
  std::FILE* p = popen("gnuplot 2>&1", "w");
  if (!p) return make_error(Errc::io, "cannot start gnuplot");
  std::fputs(script.c_str(), p);
  const int rc = pclose(p);
  std::error_code ec;
  if (rc != 0 || !fs::exists(png, ec) || fs::file_size(png, ec) == 0)
    return make_error(Errc::io, fmt::format("gnuplot failed (status {}) drawing {}", rc, png.string()));
  return {};
}

std::string gp_quote(const fs::path& p) {
  std::string s = p.string(), out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

fs::path temp_data(const std::string& stem) {
  return fs::temp_directory_path() / fmt::format("rlx-{}-{}.dat", stem, static_cast<long>(::getpid()));
}

const char* kStyle =
    "set terminal pngcairo size 1500,800 enhanced font 'DejaVu Sans,10'\n"
    "set datafile missing '?'\n"
    "set grid lc rgb '#dddddd'\n"
    "set key top left box opaque\n"
    "set style line 1 lc rgb '#1f77b4' lw 2\n"
    "set style line 2 lc rgb '#d62728' lw 2\n"
    "set style line 3 lc rgb '#2ca02c' lw 2\n"
    "set style line 4 lc rgb '#9467bd' lw 2\n";

// The number after "key": in one line of our own JSON (NaN when absent or null).
double json_number(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nan("");
  const char* s = line.c_str() + at + key.size() + 3;
  char* end = nullptr;
  const double x = std::strtod(s, &end);
  return end == s ? std::nan("") : x;
}

std::string cell(double x) { return std::isfinite(x) ? fmt::format("{:.6g}", x) : "?"; }

}  // namespace

Result<void> plot_log(const LogSummary& s, const fs::path& png) {
  if (s.points.empty()) return make_error(Errc::not_found, "the log holds no segments to plot");
  const fs::path data = temp_data("log");
  {
    std::ofstream out(data);
    // Explorers' segments arrive interleaved: draw them in creation order.
    auto points = s.points;
    std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.t < b.t; });
    std::deque<double> window;  // per-segment mean returns, for a running mean
    double sum = 0;
    double last_t = points.front().t;
    for (const auto& p : points) {
      if (p.t - last_t > 5.0) out << '\n';  // a pause (e.g. before a resume): no line across it
      last_t = p.t;
      if (p.episodes) {
        window.push_back(p.mean_return);
        sum += p.mean_return;
        if (window.size() > 25) sum -= window.front(), window.pop_front();
      }
      const double running = window.empty() ? std::nan("") : sum / static_cast<double>(window.size());
      out << cell(p.t) << ' ' << (p.episodes ? cell(p.mean_return) : "?") << ' ' << cell(running) << ' ' << p.lag << ' '
          << static_cast<int>(p.verdict) << '\n';
    }
  }
  std::string script = kStyle;
  script += fmt::format("set output {}\n", gp_quote(png));
  script += fmt::format(
      "set multiplot layout 2,1 title 'Rollout log: {} segments, {} episodes, {} versions over {:.0f} s' font ',13'\n",
      s.segments, s.episodes, s.versions_published, s.span_s());
  std::uint64_t max_lag = 0;
  for (const auto& p : s.points) max_lag = std::max(max_lag, p.lag);
  script += "set ylabel 'episode return'\nset xlabel 'time since the first segment (s)'\n";
  script += fmt::format(
      "plot {0} using 1:2 with points pt 7 ps 0.4 lc rgb '#aec7e8' title 'mean of the episodes ending in a segment', "
      "{0} using 1:3 with lines ls 1 title 'running mean (25 segments)'\n",
      gp_quote(data));
  script += fmt::format("set ylabel 'lag at admission (versions)'\nset yrange [-0.5:{}.5]\nset ytics 1\n", max_lag);
  script += fmt::format(
      "plot {0} using 1:($5==0 ? $4 : 1/0) with points pt 7 ps 0.5 lc rgb '#1f77b4' title 'trained', "
      "{0} using 1:($5==1 ? $4 : 1/0) with points pt 7 ps 0.7 lc rgb '#d62728' title 'dropped as stale'\n",
      gp_quote(data));
  script += "unset multiplot\n";
  auto r = run_gnuplot(script, png);
  std::error_code ec;
  fs::remove(data, ec);
  return r;
}

Result<void> plot_metrics(const fs::path& metrics_jsonl, const fs::path& png, std::uint64_t* bad_lines) {
  std::ifstream in(metrics_jsonl);
  if (!in) return make_error(Errc::not_found, metrics_jsonl.string() + ": cannot read");
  const fs::path data = temp_data("metrics");
  std::uint64_t rows = 0, bad = 0;
  bool evaluated = false;  // a token run's evaluator reported pass@1
  {
    std::ofstream out(data);
    std::string line;
    double last_t = std::nan(""), last_steps = 0;
    while (std::getline(in, line)) {
      const double t = json_number(line, "time_s"), steps = json_number(line, "env_steps");
      if (line.empty()) continue;
      if (!std::isfinite(t) || !std::isfinite(steps)) {
        ++bad;
        continue;
      }
      // Throughput over at least half a second (the last line, written at
      // the stop, may follow the previous one closely); a resumed run
      // appends with its clock from 0, which starts the rate anew.
      double rate = std::nan("");
      if (!std::isfinite(last_t) || t < last_t) {
        last_t = t;
        last_steps = steps;
      } else if (t - last_t >= 0.5) {
        rate = (steps - last_steps) / (t - last_t);
        last_t = t;
        last_steps = steps;
      }
      out << cell(t) << ' ' << cell(steps) << ' ' << cell(json_number(line, "mean_return")) << ' ' << cell(rate) << ' '
          << cell(json_number(line, "lag_mean")) << ' ' << cell(json_number(line, "lag_max")) << ' '
          << cell(json_number(line, "policy_loss")) << ' ' << cell(json_number(line, "value_loss")) << ' '
          << cell(json_number(line, "entropy")) << ' ' << cell(json_number(line, "pass_at_1")) << '\n';
      evaluated = evaluated || std::isfinite(json_number(line, "pass_at_1"));
      ++rows;
    }
  }
  if (bad_lines) *bad_lines = bad;
  if (rows == 0) {
    std::error_code ec;
    fs::remove(data, ec);
    return make_error(Errc::not_found, metrics_jsonl.string() + ": no metrics lines to plot");
  }
  const std::string d = gp_quote(data);
  std::string script = kStyle;
  script += fmt::format("set output {}\n", gp_quote(png));
  script += fmt::format("set multiplot layout 2,3 title {} font ',13'\n",
                        gp_quote("Run metrics: " + metrics_jsonl.parent_path().filename().string()));
  script += "set xlabel 'env steps'\nset ylabel 'mean return (last 100 episodes)'\nset format x '%.0s%c'\n";
  script += fmt::format("plot {} using 2:3 with lines ls 1 title 'mean return'\n", d);
  script += "set format x '% h'\nset xlabel 'time (s)'\nset ylabel 'env steps / s'\n";
  script += fmt::format("plot {} using 1:4 with linespoints ls 3 pt 7 ps 0.4 title 'throughput'\n", d);
  script += "set ylabel 'lag (versions)'\nset yrange [0:*]\nset offsets 0,0,0.5,0\n";
  script += fmt::format("plot {0} using 1:5 with lines ls 1 title 'lag mean', {0} using 1:6 with steps ls 2 title 'lag max'\n", d);
  script += "set autoscale y\nset offsets 0,0,0,0\n";
  if (evaluated) {  // the token policy: held-out pass@1 where the value loss would be
    script += "set ylabel 'held-out pass@1'\n";
    script += fmt::format("plot {} using 1:10 with linespoints ls 2 pt 7 ps 0.5 title 'pass@1'\n", d);
  } else {
    script += "set ylabel 'value loss'\n";
    script += fmt::format("plot {} using 1:8 with lines ls 2 title 'value loss'\n", d);
  }
  script += "set ylabel 'policy loss'\n";
  script += fmt::format("plot {} using 1:7 with lines ls 1 title 'policy loss'\n", d);
  script += "set ylabel 'entropy (nats)'\n";
  script += fmt::format("plot {} using 1:9 with lines ls 4 title 'policy entropy'\n", d);
  script += "unset multiplot\n";
  auto r = run_gnuplot(script, png);
  std::error_code ec;
  fs::remove(data, ec);
  return r;
}

}  // namespace rlx
