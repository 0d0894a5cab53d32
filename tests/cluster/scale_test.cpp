// Elastic membership as a user drives it: `rlx scale` against a running
// cluster (explorers and reward workers up and down), and `rlx node
// --join` adding a node the topology does not name; then a kill -9 of that
// node. Every run ends with the segment accounting identity and no
// explorer counted lost that was only scaled down.
#include <csignal>

#include "tests/cluster/cluster_fixture.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {

// `rlx scale` against the run in `dir` (its head.addr and cluster.secret).
Ran scale(const fs::path& dir, const std::string& what) {
  const std::string addr = read_text(dir / "head.addr");
  return run_rlx("scale --head " + addr.substr(0, addr.find('\n')) + " --secret-file " + (dir / "cluster.secret").string() +
                     " " + what,
                 dir / "cli");
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("rlx scale grows and shrinks the explorers and reward workers of a running one-node cluster",
          "[cluster][scale]") {
  TempDir t("rlx-scale-one-node");
  SplitSpec spec = endless_spec(t);  // ended by SIGTERM below
  spec.head_explorers = 1;
  spec.members = {};
  spec.extra = "[launch]\nlisten = true\n";
  const auto config = write_text(t.path / "one.toml", split_toml(spec));
  const pid_t pid = start_split_run(config, t.path, 1);
  REQUIRE(wait_for_files(t.path, [&] { return fs::exists(t.path / "head.addr"); }, 60s));

  Ran r = scale(t.path, "--explorers 3");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("explorers 1 -> 3: started 2 on 'head'") != std::string::npos);
  // The new explorers got the current weights and their segments reached the learner.
  CHECK(wait_for_files(
      t.path, [&] { return count_of(read_text(t.path / "out.txt"), "first segment reached the learner") == 2; }, 120s));
  CHECK(wait_for_metrics(t.path, [](const std::string& l) { return json_number(l, "explorers") == 3; }));

  r = scale(t.path, "--explorers 1 --rewards 2");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("explorers 3 -> 1: draining 2 on 'head'; reward workers 0 -> 2: started 2 on 'head'") !=
        std::string::npos);
  CHECK(wait_for_metrics(t.path, [](const std::string& l) {
    return json_number(l, "explorers") == 1 && json_number(l, "explorers_retired") == 2 &&
           json_number(l, "reward_workers") == 2;
  }));

  // Bad requests: refused with a reason, nothing changes.
  r = scale(t.path, "--explorers 0");
  CHECK(r.code != 0);
  CHECK(r.out.find("not in range") != std::string::npos);
  const std::string addr = read_text(t.path / "head.addr");
  r = run_rlx("scale --head " + addr.substr(0, addr.find('\n')) + " --explorers 2", t.path / "cli",
              "RLX_CLUSTER_SECRET=not-the-secret-of-this-cluster-0123 ");
  CHECK(r.code == 2);
  CHECK(r.out.find("wrong proof of the cluster secret") != std::string::npos);

  kill(pid, SIGTERM);
  CHECK(exit_code_within(pid, 120s) == 130);
  const std::string line = last_metrics_line(t.path);
  INFO(line);
  CHECK(json_number(line, "explorers_lost") == 0);  // drained on request is not lost
  CHECK(json_number(line, "explorers_retired") == 2);
  CHECK(json_number(line, "joins_refused") == 1);
  check_segment_identity(line);
  CHECK(json_number(line, "rss_mb") > 0);  // the head process's resident memory
  CHECK(json_number(line, "segments_lost") == 0);
}

TEST_CASE("a node the topology does not name joins a running cluster, takes scaled explorers, and its kill -9 is "
          "counted",
          "[cluster][scale][failure]") {
  TempDir t("rlx-scale-join");
  SplitSpec spec = endless_spec(t);  // ended by SIGTERM below
  spec.members = {"rollout-a"};
  const auto config = write_text(t.path / "split.toml", split_toml(spec));
  const pid_t pid = start_split_run(config, t.path, 2);
  REQUIRE(fs::exists(t.path / "head.addr"));
  const std::string addr = read_text(t.path / "head.addr");

  const pid_t extra = rlx_in_background("node --join " + addr.substr(0, addr.find('\n')) +
                                            " --name extra --explorers 2 --envs-per-explorer 4 --secret-file " +
                                            (t.path / "cluster.secret").string(),
                                        t.path / "extra.txt");
  CHECK(wait_for_metrics(t.path, [](const std::string& l) {
    return json_number(l, "nodes") == 3 && json_number(l, "explorers") == 3;
  }));
  // Each new explorer goes to the node running the fewest.
  Ran r = scale(t.path, "--explorers 5");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("explorers 3 -> 5: started 1 on 'extra', 1 on 'rollout-a'") != std::string::npos);
  CHECK(wait_for_metrics(t.path, [](const std::string& l) { return json_number(l, "explorers") == 5; }));
  // The newest leave first: ids 4 (rollout-a), 3 and 2 (extra).
  r = scale(t.path, "--explorers 2");
  CHECK(r.code == 0);
  CHECK(r.out.find("explorers 5 -> 2: draining 2 on 'extra', 1 on 'rollout-a'") != std::string::npos);
  CHECK(wait_for_metrics(t.path, [](const std::string& l) {
    return json_number(l, "explorers") == 2 && json_number(l, "explorers_retired") == 3;
  }));

  // The joined node dies: its last explorer is lost, the run goes on with rollout-a's.
  REQUIRE(kill(extra, SIGKILL) == 0);
  CHECK(exit_code_within(extra, 60s) == 128 + SIGKILL);
  CHECK(wait_for_metrics(t.path, [](const std::string& l) {
    return json_number(l, "nodes") == 2 && json_number(l, "explorers") == 1 && json_number(l, "explorers_lost") == 1;
  }));
  const double steps = json_number(last_metrics_line(t.path), "env_steps");
  CHECK(wait_for_metrics(t.path, [&](const std::string& l) { return json_number(l, "env_steps") > steps + 5'000; }));

  kill(pid, SIGTERM);
  CHECK(exit_code_within(pid, 120s) == 130);
  const std::string out = read_text(t.path / "out.txt");
  INFO(out);
  CHECK(out.find("node 'extra' joined: 3 nodes now (not in the topology); runs 2 explorers (ids 1..2)") !=
        std::string::npos);
  CHECK(out.find("node 'extra' went away") != std::string::npos);
  CHECK(read_text(t.path / "extra.txt").find("explorers 1..2 started (4 envs each") != std::string::npos);
  const std::string line = last_metrics_line(t.path);
  INFO(line);
  CHECK(json_number(line, "explorers_retired") == 3);
  CHECK(json_number(line, "explorers_lost") == 1);
  check_segment_identity(line);  // what the killed node had in hand is counted lost
  CHECK(node_processes(config) == 0);
}

namespace {

// A one-node CartPole run with [autoscale] every 1 s between `lo` and `hi`
// explorers; `learner` and `more` are its [learner] keys and extra tables.
std::string autoscale_toml(const fs::path& log_dir, const std::string& env, int explorers, int envs, int max_staleness,
                           const std::string& learner, const std::string& more, int lo, int hi) {
  return "[run]\nname = \"autoscale-test\"\nseed = 1\nenv = \"" + env + "\"\nmax_staleness = " +
         std::to_string(max_staleness) + "\nlog_dir = \"" + log_dir.string() +
         "\"\nreport_interval_s = 0.25\nstop = { mean_return = 100000.0, max_env_steps = 50000000, max_seconds = 240.0 }\n\n"
         "[learner]\n" + learner + "\n\n[explorer]\nsegment_steps = 64\n\n" + more +
         "\n\n[autoscale]\nenabled = true\nmin_explorers = " + std::to_string(lo) + "\nmax_explorers = " +
         std::to_string(hi) + "\ninterval_s = 1.0\n\n[[node]]\nname = \"head\"\nactors = [\"coordinator\", \"learner\", "
         "\"weight_store\", \"recorder\"]\nexplorers = " + std::to_string(explorers) + "\nenvs_per_explorer = " +
         std::to_string(envs) + "\n";
}

// Runs `config` until the metrics satisfy `reached`, then SIGTERM; checks the run's end.
void autoscale_run(const fs::path& dir, const fs::path& config, const std::function<bool(const std::string&)>& reached) {
  const pid_t pid = launch_in_background(config, dir);
  const bool ok = wait_for_metrics(dir, reached, 180s).has_value();
  kill(pid, SIGTERM);
  CHECK(exit_code_within(pid, 120s) == 130);
  INFO(read_text(dir / "out.txt"));
  CHECK(ok);
  const std::string line = last_metrics_line(dir);
  INFO(line);
  CHECK(json_number(line, "explorers_lost") == 0);
  check_segment_identity(line);
}

}  // namespace

TEST_CASE("autoscaling adds explorers up to max_explorers while a fast learner waits for data", "[cluster][autoscale]") {
  TempDir t("rlx-autoscale-up");
  // Each env step takes 5 ms more (a slow simulator): one explorer cannot feed a learner that trains in milliseconds.
  const auto config = write_text(
      t.path / "up.toml",
      autoscale_toml(t.path, "exec:python3 " RLX_SOURCE_DIR "/examples/envs/cartpole.py", 1, 4, 8,
                     "batch_segments = 2\nepochs = 1\nminibatches = 1", "[external]\nargs = [\"--step-ms\", \"5\"]", 1, 3));
  autoscale_run(t.path, config, [](const std::string& l) {
    return json_number(l, "explorers") == 3 && json_number(l, "autoscale_changes") >= 2;
  });
  const std::string out = read_text(t.path / "out.txt");
  CHECK(out.find("autoscale: learner idle") != std::string::npos);
  CHECK(out.find("explorers 2 -> 3: started 1 on 'head'") != std::string::npos);
}

TEST_CASE("autoscaling removes explorers down to min_explorers while a slow learner lets their segments go stale",
          "[cluster][autoscale]") {
  TempDir t("rlx-autoscale-down");
  // 40 epochs over 4 segments of 16 envs per update, and a staleness bound of 1: four explorers make far more than
  // the learner can take in time.
  const auto config = write_text(t.path / "down.toml",
                                 autoscale_toml(t.path, "cartpole", 4, 16, 1, "batch_segments = 4\nepochs = 40", "", 1, 4));
  autoscale_run(t.path, config, [](const std::string& l) {
    return json_number(l, "explorers") == 1 && json_number(l, "explorers_retired") >= 3;
  });
  const std::string out = read_text(t.path / "out.txt");
  CHECK(out.find("of segments dropped stale") != std::string::npos);
  CHECK(out.find("explorers 2 -> 1: draining 1 on 'head'") != std::string::npos);
}
