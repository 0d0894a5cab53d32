#include "core/progress.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace rlx {

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

double remaining_s(double done, double total, double elapsed_s) {
  if (!(done > 0) || !std::isfinite(elapsed_s) || elapsed_s < 0) return std::numeric_limits<double>::quiet_NaN();
  return done >= total ? 0.0 : elapsed_s / done * (total - done);
}

std::string left_text(double done, double total, double elapsed_s, double limit_s) {
  double left = remaining_s(done, total, elapsed_s);
  if (limit_s > 0 && !(left < limit_s - elapsed_s)) left = std::max(0.0, limit_s - elapsed_s);
  return std::isfinite(left) ? "~" + human_duration(left) + " left" : std::string();
}

}  // namespace rlx
