// A member node outlives its head: it pauses its explorers and waits for a
// restarted head ([launch] reconnect_s), rejoins one resumed from the same
// run's log without restarting anything, and gives up (exit 4) when none
// comes back or the head that comes back runs another run.
#include <csignal>

#include "tests/cluster/cluster_fixture.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kSecretEnv{"RLX_CLUSTER_SECRET=head-restart-test-secret-0123"};

// `rlx node --node head` (the head alone, serving its gate), output to `out`.
pid_t start_head(const fs::path& config, const fs::path& out, bool resume) {
  ChildOptions co;
  co.env = kSecretEnv;
  auto pid = spawn_child({"/bin/sh", "-c",
                          "exec " RLX_BINARY " node --config " + config.string() + " --node head" +
                              (resume ? " --resume" : "") + " > " + out.string() + " 2>&1"},
                         co);
  REQUIRE(pid.ok());
  return *pid;
}

// The port the head in `out` printed it listens on ("" after `limit`).
std::string head_port(const fs::path& out, std::chrono::milliseconds limit) {
  std::string port;
  wait_for_files(
      out.parent_path(),
      [&] {
        const std::string text = read_text(out);
        const std::string mark = "head listening on 127.0.0.1:";
        const auto at = text.find(mark);
        if (at != std::string::npos) {
          const auto from = at + mark.size();
          port = text.substr(from, text.find_first_not_of("0123456789", from) - from);
        }
        return !port.empty();
      },
      limit);
  return port;
}

// `rlx node --node NAME --head 127.0.0.1:PORT`, output to `out`; it does
// not die with the test's other children, only on its own.
pid_t start_member(const fs::path& config, const std::string& name, const std::string& port, const fs::path& out) {
  ChildOptions co;
  co.env = kSecretEnv;
  auto pid = spawn_child({"/bin/sh", "-c",
                          "exec " RLX_BINARY " node --config " + config.string() + " --node " + name +
                              " --head 127.0.0.1:" + port + " > " + out.string() + " 2>&1"},
                         co);
  REQUIRE(pid.ok());
  return *pid;
}

// A split run whose head and member nodes are processes of their own
// (member NAME's output in NAME.txt), all started; the head's port.
struct Processes {
  fs::path config;
  pid_t head = 0;
  std::string port;
  std::vector<pid_t> members;
};
Processes start_processes(const TempDir& t, const std::vector<std::string>& members, double reconnect_s,
                          std::uint64_t max_env_steps = 50'000'000) {
  SplitSpec spec;
  spec.log_dir = t.path;
  spec.members = members;
  spec.max_env_steps = max_env_steps;
  spec.extra = "[launch]\nreconnect_s = " + std::to_string(reconnect_s) + "\n";
  Processes run;
  run.config = write_text(t.path / "split.toml", split_toml(spec));
  run.head = start_head(run.config, t.path / "head.txt", false);
  run.port = head_port(t.path / "head.txt", 60s);
  REQUIRE(!run.port.empty());
  for (const auto& name : members) run.members.push_back(start_member(run.config, name, run.port, t.path / (name + ".txt")));
  return run;
}

}  // namespace

TEST_CASE("member nodes whose head is killed and not restarted leave on SIGTERM at once or give up after reconnect_s",
          "[cluster][failure]") {
  TempDir t("rlx-head-dies");
  const Processes run = start_processes(t, {"rollout-a", "rollout-b"}, 3);
  const auto& [config, head, port, members] = run;
  const pid_t a = members[0], b = members[1];
  const bool running = wait_for_nodes(t.path, 3, 120s);
  exit_code_within(head, 0s);  // kill -9
  REQUIRE(running);
  // rollout-a is told to leave while it waits: it does, without waiting out reconnect_s.
  REQUIRE(wait_for_files(
      t.path, [&] { return read_text(t.path / "rollout-a.txt").find("reaching 127.0.0.1:" + port) != std::string::npos; }, 60s));
  kill(a, SIGTERM);
  CHECK(exit_code_within(a, 60s) == 130);
  CHECK(read_text(t.path / "rollout-a.txt").find("left the cluster while the head was away") != std::string::npos);
  // rollout-b waits reconnect_s for a head that never comes back.
  CHECK(exit_code_within(b, 60s) == 4);
  const std::string out = read_text(t.path / "rollout-b.txt");
  INFO(out);
  CHECK(out.find("the head went away") != std::string::npos);
  CHECK(out.find("did not come back") != std::string::npos);
}

TEST_CASE("a member node rejoins a head restarted with --resume without restarting, and every segment is accounted "
          "for",
          "[cluster][failure][resume]") {
  TempDir t("rlx-head-restart");
  Processes run = start_processes(t, {"rollout-a", "rollout-b"}, 120, 40'000);
  auto& [config, head, port, members] = run;
  const pid_t a = members[0], b = members[1];
  // Some versions in: the member nodes hold weights and segments of the first head.
  const auto before = wait_for_metrics(t.path, [](const std::string& l) {
    return json_number(l, "nodes") == 3 && json_number(l, "policy_version") >= 5;
  });
  exit_code_within(head, 0s);  // kill -9 of the head: learner, store, coordinator, gate
  INFO(read_text(t.path / "head.txt"));
  REQUIRE(before);
  // The members wait (paused) for a head at the same address.
  CHECK(wait_for_files(
      t.path, [&] { return read_text(t.path / "rollout-a.txt").find("reaching 127.0.0.1:" + port) != std::string::npos; }, 60s));

  head = start_head(config, t.path / "head2.txt", true);
  CHECK(head_port(t.path / "head2.txt", 120s) == port);  // where the run listened before (head.addr)
  const int code = exit_code_within(head, 300s);
  const std::string out = read_text(t.path / "head2.txt");
  INFO(out);
  INFO(read_text(t.path / "rollout-a.txt"));
  CHECK(code == 3);  // the step budget, reached by the members' explorers after the restart
  CHECK(out.find("node 'rollout-a' rejoined") != std::string::npos);
  CHECK(out.find("node 'rollout-b' rejoined") != std::string::npos);
  // Never restarted: each member process was stopped by the restarted head at the end.
  CHECK(exit_code_within(a, 60s) == 0);
  CHECK(exit_code_within(b, 60s) == 0);
  CHECK(read_text(t.path / "rollout-a.txt").find("rejoined the restarted head") != std::string::npos);
  const std::string line = last_metrics_line(t.path);
  INFO(line);
  CHECK(json_number(line, "explorers_rejoined") == 2);
  CHECK(json_number(line, "explorers_lost") == 0);
  CHECK(json_number(line, "policy_version") > json_number(*before, "policy_version"));
  CHECK(json_number(line, "env_steps") >= 40'000);
  check_segment_identity(line);
}

TEST_CASE("a member node that outlived its head is refused by a head that starts its run afresh, and exits",
          "[cluster][failure]") {
  TempDir t("rlx-head-fresh");
  Processes run = start_processes(t, {"rollout-a"}, 120);
  auto& [config, head, port, members] = run;
  const pid_t member = members[0];
  REQUIRE(wait_for_nodes(t.path, 2, 120s));
  exit_code_within(head, 0s);
  // A fresh start (no --resume) of a topology that names the port the member knows.
  const std::string fixed = read_text(config);
  const auto at = fixed.find("port = 0");
  REQUIRE(at != std::string::npos);
  write_text(config, fixed.substr(0, at) + "port = " + port + fixed.substr(at + 8));
  head = start_head(config, t.path / "head2.txt", false);
  CHECK(exit_code_within(member, 120s) == 4);
  const std::string out = read_text(t.path / "rollout-a.txt");
  INFO(out);
  INFO(read_text(t.path / "head2.txt"));
  CHECK(out.find("started afresh, not resumed") != std::string::npos);
  kill(head, SIGTERM);
  CHECK(exit_code_within(head, 60s) == 130);
}
