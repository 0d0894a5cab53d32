// Shared test fixtures: small valid messages and configs.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/config.hpp"
#include "envs/env.hpp"
#include "messages/types.hpp"

namespace rlx::test {

// A valid segment of T steps, B envs, obs_dim 4, every step at `version`.
Segment make_segment(std::uint32_t T, std::uint32_t B, std::uint64_t version, std::uint32_t explorer = 0);

// A valid weight set: one tensor of `floats` values (value i is i + version), checksummed.
WeightSetData make_weight_set(std::uint64_t version, std::size_t floats);

// A set of `floats` weights after `steps` Adam-like updates of size `lr`
// (every weight moves a little each step) from a fixed start: what
// consecutive versions of a trained policy look like to a delta.
WeightSetData trained_weight_set(std::uint64_t version, std::size_t floats, int steps, float lr = 1e-3f);

// The embedded cluster.toml, parsed (must be valid).
ClusterConfig default_config();
// The same with a tiny token policy (moe_transformer: d_model 32, 2 layers,
// 2 heads, 4 experts top-2, expert_hidden 32, max_len 48).
ClusterConfig tiny_token_config();

// Parses TOML text as "test.toml" with the built-in registries.
Result<ClusterConfig> parse(const std::string& text);

// The largest difference between two weight sets' values (same layout).
double max_diff(const WeightSetData& a, const WeightSetData& b);

// A fresh, empty directory of this test process (named `name`-pid under
// the system's temporary directory), removed with everything in it.
// Ends this test's process as skipped, saying why on stderr: for a test
// that cannot run on this machine (ctest shows it as skipped, through the
// suite's SKIP_RETURN_CODE 77, never as passed). Objects on the stack are
// not destroyed: clean up first.
[[noreturn]] void skip_test(const std::string& why);

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// A TCP connection to 127.0.0.1:port whose reads and writes give up after
// 30 s (so a server that never closes it fails a test instead of hanging it).
int connect_local(std::uint16_t port);

// Reads until the other side closes, then closes `fd`; true when the other
// side closed it (not a timeout).
bool closed_by_peer(int fd);

// Connects to 127.0.0.1:port, writes `n` random bytes (from `seed`), closes.
void send_garbage(std::uint16_t port, std::size_t n, std::uint32_t seed = 7);

// GET `path` from 127.0.0.1:port over a plain socket (HTTP/1.0: the
// server closes when done): the whole reply, status line first; and the
// body of such a reply.
std::string http_get(std::uint16_t port, const std::string& path);
std::string http_body(const std::string& reply);

// Debian's headless Chromium (chromium-headless-shell, or chromium): its
// path, or the test ends as skipped.
std::string require_headless_browser();

// A shell command's standard output (add 2>&1 for its errors too) and its
// exit status (-1 when it did not exit, or could not be started). No
// assertions (any thread may call it).
struct CommandOutput {
  std::string out;
  int status = -1;
};
CommandOutput run_command(const std::string& command);

// The DOM of `url` once the page's scripts ran `virtual_ms` of virtual time
// (timers run at once; a fetch pauses the clock until it is answered), in
// a profile of its own under `dir`; given up past 120 s. No assertions
// (any thread may call it): the test checks `ok`.
struct PageDump {
  bool ok = false;  // the browser exited 0
  std::string dom;
  std::string command;
};
PageDump browser_dom(const std::string& browser, const std::string& url, int virtual_ms,
                     const std::filesystem::path& dir);

}  // namespace rlx::test
