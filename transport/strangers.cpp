#include "transport/strangers.hpp"

#include <fmt/format.h>

namespace rlx {

const char* stranger_name(Stranger kind) {
  switch (kind) {
    case Stranger::silent: return "silent";
    case Stranger::garbage: return "garbage";
    case Stranger::half_open: return "half_open";
    case Stranger::over_limit: return "over_limit";
    case Stranger::unproven: return "unproven";
  }
  return "?";
}

StrangerWatch::StrangerWatch(Logger log) : log_(log ? std::move(log) : null_logger()) {}

void StrangerWatch::saw(const std::string& port, Stranger kind, const std::string& peer, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& counts = counts_[port];
  ++counts[static_cast<std::size_t>(kind)];
  std::uint64_t on_port = 0;
  for (auto c : counts) on_port += c;
  const auto held = throttles_[port].allow();
  if (!held) return;
  log_->warn("stranger on the {} port from {}: {}{}, closed ({} on this port so far{})", port, peer,
             stranger_name(kind), detail.empty() ? "" : " (" + detail + ")", on_port,
             *held ? fmt::format("; {} more not logged", *held) : "");
}

std::map<std::string, StrangerWatch::ByKind> StrangerWatch::by_port() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::uint64_t StrangerWatch::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t n = 0;
  for (const auto& [port, counts] : counts_)
    for (auto c : counts) n += c;
  return n;
}

std::string first_bytes_text(const std::uint8_t* data, std::size_t n) {
  std::string s = "first bytes";
  for (std::size_t i = 0; i < n && i < 8; ++i) s += fmt::format(" {:02x}", data[i]);
  if (n > 8) s += " ...";
  return s;
}

}  // namespace rlx
