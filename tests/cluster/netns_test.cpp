// Real separate hosts: the head and two rollout nodes each in its own
// network namespace, joined by veth pairs on a bridge, so every byte
// between them crosses a (virtual) wire with its own IP address. Needs
// root and iproute2 (CI runs as root); the namespaces are removed on every
// exit path.
#include <unistd.h>

#include "tests/cluster/cluster_fixture.hpp"

using namespace rlx;
using namespace rlx::test;

namespace {

// Where the namespaces' setup commands write (the test's own directory).
fs::path setup_log;

bool sh(const std::string& cmd) { return std::system((cmd + " >> " + setup_log.string() + " 2>&1").c_str()) == 0; }

// Three namespaces: head-PID (with the bridge, 10.231.0.1) and one per
// member node (10.231.0.2, .3). Deleted in the destructor.
struct Hosts {
  std::string suffix = std::to_string(getpid());
  std::vector<std::string> made;
  bool ok = true;

  std::string ns(const std::string& node) const { return node + "-" + suffix; }
  // The member's end of its veth pair (names are at most 15 characters).
  std::string nic(int i) const { return "rx" + std::to_string(i) + "n" + suffix.substr(0, 8); }

  explicit Hosts(const std::vector<std::string>& members) {
    const std::string h = ns("head");
    ok = sh("ip netns add " + h);
    if (ok) made.push_back(h);
    ok = ok && sh("ip -n " + h + " link set lo up") && sh("ip -n " + h + " link add br0 type bridge") &&
         sh("ip -n " + h + " addr add 10.231.0.1/24 dev br0") && sh("ip -n " + h + " link set br0 up");
    for (std::size_t i = 0; ok && i < members.size(); ++i) {
      const std::string m = ns(members[i]), peer = "rx" + std::to_string(i) + "h" + suffix.substr(0, 8);
      ok = sh("ip netns add " + m);
      if (ok) made.push_back(m);
      ok = ok && sh("ip link add " + peer + " type veth peer name " + nic(static_cast<int>(i))) &&
           sh("ip link set " + peer + " netns " + h) && sh("ip link set " + nic(static_cast<int>(i)) + " netns " + m) &&
           sh("ip -n " + h + " link set " + peer + " master br0 up") &&
           sh("ip -n " + m + " addr add 10.231.0." + std::to_string(i + 2) + "/24 dev " + nic(static_cast<int>(i))) &&
           sh("ip -n " + m + " link set " + nic(static_cast<int>(i)) + " up") && sh("ip -n " + m + " link set lo up");
    }
  }
  ~Hosts() { remove(); }
  void remove() {
    for (const auto& n : made) sh("ip netns del " + n);  // takes the veth pairs with it
    made.clear();
  }
  std::uint64_t counter(int i, const std::string& which) const {
    const std::string out = (setup_log.parent_path() / ("counter-" + std::to_string(i))).string();
    const std::string cmd = "ip netns exec " + ns("rollout-" + std::string(1, static_cast<char>('a' + i))) +
                            " cat /sys/class/net/" + nic(i) + "/statistics/" + which + " > " + out;
    CHECK(std::system(cmd.c_str()) == 0);
    const std::string text = read_text(out);
    fs::remove(out);
    return text.empty() ? 0 : std::stoull(text);
  }
};

// Skips the test (ctest: skipped) unless root with iproute2 runs it.
void need_namespaces(const TempDir& t) {
  setup_log = t.path / "netns-setup.log";
  if (geteuid() == 0 && std::system("command -v ip > /dev/null") == 0) return;
  std::error_code ec;
  fs::remove_all(t.path, ec);
  skip_test("needs root and iproute2 (ip netns); CI runs as root");
}

// Skips the test when the namespaces could not be made (root without
// CAP_SYS_ADMIN, as in an unprivileged container), removing what was.
void need_made(Hosts& hosts, const TempDir& t) {
  if (hosts.ok) return;
  const std::string why = read_text(setup_log);
  hosts.remove();
  std::error_code ec;
  fs::remove_all(t.path, ec);
  skip_test("cannot create network namespaces here: " + why);
}

// The split CartPole run with its head at 10.231.0.1 and rollout-a, -b at
// .2 and .3, each member "ssh"ed into its namespace (it runs with that
// namespace's address only), to a mean return of 150.
SplitSpec spec_in(const Hosts& hosts, const TempDir& t) {
  SplitSpec spec;
  spec.log_dir = t.path / "run";
  spec.head_host = "10.231.0.1";
  spec.member_hosts = {"10.231.0.2", "10.231.0.3"};
  spec.launcher = Launcher::ssh;
  spec.mean_return = 150;
  spec.max_env_steps = 600'000;
  spec.envs = 16;
  spec.extra = "[launch]\nssh_command = \"ip netns exec {node}-" + hosts.suffix + " sh -c {command}\"\nconnect_timeout_s = 30.0\n";
  return spec;
}

// `rlx launch` of `spec` inside the head's namespace.
Ran launch_in(const Hosts& hosts, const TempDir& t, const SplitSpec& spec, fs::path* config_out) {
  const auto secret = write_text(t.path / "secret", "netns-test-secret-0123456789\n");
  *config_out = write_text(t.path / "split.toml", split_toml(spec));
  return run_rlx("launch --secret-file " + secret.string() + " " + config_out->string(), t.path,
                 "ip netns exec " + hosts.ns("head") + " ");
}

}  // namespace

TEST_CASE("a run split across network namespaces learns and its traffic crosses the virtual wires",
          "[cluster][net][slow]") {
  TempDir t("rlx-netns");
  need_namespaces(t);
  Hosts hosts({"rollout-a", "rollout-b"});
  need_made(hosts, t);
  const SplitSpec spec = spec_in(hosts, t);
  fs::path config;
  const Ran r = launch_in(hosts, t, spec, &config);
  INFO(r.out);
  CHECK(r.code == 0);  // solved
  CHECK(r.out.find("head listening on 10.231.0.1:") != std::string::npos);
  CHECK(r.out.find("node 'rollout-a' joined from") != std::string::npos);
  // Weights on the bulk channel, reached at the head's address from the other hosts.
  CHECK(r.out.find("bulk channel on 10.231.0.1:") != std::string::npos);
  CHECK(r.out.find("bulk channel: node 'rollout-a' connected from 10.231.0.") != std::string::npos);
  CHECK(r.out.find("through the middleman") == std::string::npos);
  const std::string line = last_metrics_line(spec.log_dir);
  CHECK(json_number(line, "nodes") == 3);
  CHECK(json_number(line, "mean_return") >= 150);
  // Segments left each rollout host (34 B a step), weights arrived at it (154 KB a version).
  for (int i = 0; i < 2; ++i) {
    INFO("rollout node " << i);
    CHECK(hosts.counter(i, "tx_bytes") > 100'000);
    CHECK(hosts.counter(i, "rx_bytes") > 1'000'000);
  }
  CHECK(node_processes(config) == 0);
}

TEST_CASE("a learner rank on another host trains with the head's rank across the virtual wire",
          "[cluster][net][dp][slow]") {
  TempDir t("rlx-netns-ranks");
  need_namespaces(t);
  Hosts hosts({"rollout-a", "rollout-b"});
  need_made(hosts, t);
  SplitSpec spec = spec_in(hosts, t);
  spec.ranks = 2;
  spec.member_ranks = {1, 0};  // rank 1 on rollout-a's host, through its ssh launcher
  fs::path config;
  const Ran r = launch_in(hosts, t, spec, &config);
  INFO(r.out);
  CHECK(r.code == 0);  // solved
  CHECK(r.out.find("learner rank 1 on node 'rollout-a' (10.231.0.2)") != std::string::npos);
  // Its Gloo pairs bind 10.231.0.2, an address only rollout-a's namespace has.
  CHECK(r.out.find("learner group formed: 2 ranks") != std::string::npos);
  CHECK(json_number(last_metrics_line(spec.log_dir), "mean_return") >= 150);
  CHECK(std::system(("pgrep -f '[l]earner-rank --config " + spec.log_dir.string() + "' > /dev/null").c_str()) != 0);
  CHECK(node_processes(config) == 0);
  // Replayed here, outside the namespaces, with both ranks on this host: bit for bit.
  const Ran replayed = run_rlx("replay " + spec.log_dir.string(), t.path);
  INFO(replayed.out);
  CHECK(replayed.code == 0);
}
