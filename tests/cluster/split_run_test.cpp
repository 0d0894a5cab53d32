// Multi-node runs as a user starts them: `rlx launch` of a topology whose
// member nodes are processes (local, through the ssh template, through a
// Slurm script), stopped by the budget, by SIGTERM, or killed.
#include <csignal>
#include <thread>

#include "tests/cluster/cluster_fixture.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {
// A split run in `t` that only a signal ends, with its three processes
// up: the launcher's pid (`config`: its topology file).
pid_t start_endless_split(const TempDir& t, fs::path* config) {
  *config = write_text(t.path / "split.toml", split_toml(endless_spec(t)));
  return start_split_run(*config, t.path, 3);
}
}  // namespace

TEST_CASE("a CartPole run split across a head and two rollout node processes learns", "[cluster][slow]") {
  TempDir t("rlx-split-learns");
  SplitSpec spec;
  spec.log_dir = t.path;
  spec.mean_return = 150;
  spec.max_env_steps = 600'000;
  spec.envs = 16;
  const auto config = write_text(t.path / "split.toml", split_toml(spec));
  const Ran r = run_rlx("launch " + config.string(), t.path);
  INFO(r.out);
  CHECK(r.code == 0);  // solved
  CHECK(r.out.find("node 'rollout-a' joined") != std::string::npos);
  CHECK(r.out.find("node 'rollout-b' joined") != std::string::npos);
  // Weights crossed on the bulk channel, with nothing left to the middleman.
  CHECK(r.out.find("bulk channel: node 'rollout-a' connected") != std::string::npos);
  CHECK(r.out.find("bulk channel: node 'rollout-b' connected") != std::string::npos);
  CHECK(r.out.find("through the middleman") == std::string::npos);
  const std::string line = last_metrics_line(t.path);
  CHECK(json_number(line, "nodes") == 3);
  CHECK(max_metric(t.path, "explorers") == 2);
  CHECK(json_number(line, "explorers") == 0);  // the last line is written after the drain
  CHECK(json_number(line, "mean_return") >= 150);
  check_segment_identity(line);
  CHECK(json_number(line, "segments_lost") == 0);
  CHECK(node_processes(config) == 0);
}

TEST_CASE("SIGTERM to rlx launch drains every node and exits 130 with no node process left", "[cluster][stop]") {
  TempDir t("rlx-split-sigterm");
  fs::path config;
  const pid_t pid = start_endless_split(t, &config);
  kill(pid, SIGTERM);
  CHECK(exit_code_within(pid, 60s) == 130);
  INFO(read_text(t.path / "out.txt"));
  CHECK(read_text(t.path / "out.txt").find("stopped by the head: interrupted (SIGTERM)") != std::string::npos);
  // A graceful drain loses nothing: each explorer finished and sent the segment in hand.
  const std::string line = last_metrics_line(t.path);
  check_segment_identity(line);
  CHECK(json_number(line, "segments_lost") == 0);
  CHECK(node_processes(config) == 0);
}

TEST_CASE("kill -9 of rlx launch takes its node processes down with it", "[cluster][stop]") {
  TempDir t("rlx-split-kill");
  fs::path config;
  const pid_t pid = start_endless_split(t, &config);
  exit_code_within(pid, 0s);  // kill -9
  CHECK(no_nodes_left_within(config, 20s));
}

TEST_CASE("nodes started through the ssh command template and a Slurm script join the run", "[cluster][launch]") {
  TempDir t("rlx-split-launchers");
  // A stand-in srun: drops its options and runs the command.
  write_text(t.path / "srun", "#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n");
  fs::permissions(t.path / "srun", fs::perms::owner_all);
  const auto secret = write_text(t.path / "secret", "launcher-test-secret-0123456789\n");
  SplitSpec spec;
  spec.log_dir = t.path / "run";
  spec.max_env_steps = 30'000;
  spec.extra = "[launch]\nssh_command = \"sh -c {command}\"\nslurm_submit = \"sh\"\nslurm_options = [\"--time=00:10:00\"]\n";
  std::string toml = split_toml(spec);
  // rollout-a over "ssh", rollout-b through Slurm.
  const auto first = toml.find("launcher = \"local\"");
  toml.replace(first, 18, "launcher = \"ssh\"");
  const auto second = toml.find("launcher = \"local\"");
  toml.replace(second, 18, "launcher = \"slurm\"");
  const auto config = write_text(t.path / "split.toml", toml);

  const Ran missing =
      run_rlx("launch " + config.string(), t.path, "env -u RLX_CLUSTER_SECRET_FILE RLX_CLUSTER_SECRET=only-in-the-environment ");
  CHECK(missing.code == 2);  // an ssh node needs the secret as a file on its host
  CHECK(missing.out.find("give the cluster secret as a file") != std::string::npos);

  const Ran r = run_rlx("launch --secret-file " + secret.string() + " " + config.string(), t.path,
                        "PATH=" + t.path.string() + ":$PATH ");
  INFO(r.out);
  CHECK(r.code == 3);  // the step budget
  CHECK(r.out.find("starting node 'rollout-a' (ssh): sh -c ") != std::string::npos);
  CHECK(r.out.find("starting node 'rollout-b' (slurm): sh ") != std::string::npos);
  CHECK(r.out.find("node 'rollout-a' joined") != std::string::npos);
  CHECK(r.out.find("node 'rollout-b' joined") != std::string::npos);
  const std::string script = read_text(spec.log_dir / "launch" / "rollout-b.sbatch");
  CHECK(script.find("#SBATCH --nodelist=127.0.0.1") != std::string::npos);
  CHECK(script.find("#SBATCH --time=00:10:00") != std::string::npos);
  CHECK(script.find("exec srun --nodes=1 --ntasks=1 ") != std::string::npos);
  CHECK(script.find("--secret-file " + secret.string()) != std::string::npos);
  CHECK(script.find("launcher-test-secret") == std::string::npos);  // never the secret itself
  CHECK(node_processes(config) == 0);
}

TEST_CASE("kill -9 of one rollout node: its explorer is counted lost and the run goes on to its budget",
          "[cluster][failure]") {
  TempDir t("rlx-split-node-dies");
  SplitSpec spec;
  spec.log_dir = t.path;
  spec.max_env_steps = 120'000;
  const auto config = write_text(t.path / "split.toml", split_toml(spec));
  const pid_t pid = start_split_run(config, t.path, 3);
  const auto b = node_pids(config, "rollout-b");
  REQUIRE(b.size() == 1);
  REQUIRE(kill(b[0], SIGKILL) == 0);
  const int code = exit_code_within(pid, 300s);
  const std::string out = read_text(t.path / "out.txt");
  INFO(out);
  CHECK(code == 3);  // the budget, reached by the node that is left
  CHECK(out.find("node 'rollout-b' went away") != std::string::npos);
  const std::string line = last_metrics_line(t.path);
  CHECK(json_number(line, "explorers_lost") == 1);
  CHECK(json_number(line, "env_steps") >= 120'000);
  check_segment_identity(line);  // what rollout-b had in hand or on the wire is counted lost
  CHECK(node_processes(config) == 0);
}

TEST_CASE("a member node that stops answering (SIGSTOP) is evicted, its explorer counted lost, and the run goes on",
          "[cluster][failure]") {
  TempDir t("rlx-split-node-stops");
  SplitSpec spec = endless_spec(t);  // ended by SIGTERM below
  spec.extra = "[launch]\nheartbeat_s = 0.2\nevict_after_s = 3.0\n";
  const auto config = write_text(t.path / "split.toml", split_toml(spec));
  const pid_t pid = start_split_run(config, t.path, 3);
  const auto b = node_pids(config, "rollout-b");
  REQUIRE(b.size() == 1);
  REQUIRE(kill(b[0], SIGSTOP) == 0);  // alive to the kernel and to TCP, silent to the head
  const bool evicted = wait_for_files(
      t.path, [&] { return read_text(t.path / "out.txt").find("node 'rollout-b' has not answered") != std::string::npos; },
      120s);
  std::string out = read_text(t.path / "out.txt");
  INFO(out);
  if (!evicted) kill(b[0], SIGCONT);
  REQUIRE(evicted);
  // The run goes on with the other node: its env steps still grow.
  const double steps_at_eviction = json_number(last_metrics_line(t.path), "env_steps");
  CHECK(wait_for_files(
      t.path,
      [&] {
        const std::string line = last_metrics_line(t.path);
        return !line.empty() && line.back() == '}' && json_number(line, "env_steps") > steps_at_eviction + 10'000 &&
               json_number(line, "nodes") == 2;
      },
      120s));
  // Woken up, the evicted node finds it was told to stop, and exits by itself.
  REQUIRE(kill(b[0], SIGCONT) == 0);
  CHECK(wait_for_exit(b[0], 60s));
  kill(pid, SIGTERM);
  const int code = exit_code_within(pid, 120s);
  out = read_text(t.path / "out.txt");
  CHECK(code == 130);
  CHECK(out.find("rollout-b: stopped by the head: evicted") != std::string::npos);
  const std::string line = last_metrics_line(t.path);
  CHECK(json_number(line, "nodes_evicted") == 1);
  CHECK(json_number(line, "explorers_lost") == 1);
  check_segment_identity(line);
  CHECK(node_processes(config) == 0);
}
