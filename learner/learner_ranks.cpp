#include "learner/learner_ranks.hpp"

#include <fstream>

#include "core/child_process.hpp"
#include "learner/learner_core.hpp"

namespace rlx {

namespace {

Result<pid_t> spawn_rank(const LearnerRanksOptions& o, int rank, std::uint16_t port, const Logger& log) {
  const NodeConfig* node = static_cast<std::size_t>(rank - 1) < o.places.size() ? &o.places[rank - 1] : nullptr;
  std::vector<std::string> argv{o.binary, "learner-rank", "--config", o.config_file.string(),
                                "--rank", std::to_string(rank), "--world", std::to_string(o.world),
                                "--store", o.host + ":" + std::to_string(port), "--host", node ? node->host : o.host};
  if (node && node->launcher != Launcher::local) {
    if (!o.remote)
      return make_error(Errc::config_range, "learner rank " + std::to_string(rank) + " is placed on node '" +
                                                node->name + "' (launcher " + to_string(node->launcher) +
                                                "), which only `rlx launch` can start");
    log->info("learner rank {} on node '{}' ({})", rank, node->name, node->host);
    return o.remote(*node, argv);
  }
  // The rank dies with the head and leaves Ctrl-C to it (the head drains and releases the ranks).
  return spawn_child(argv);
}

// The store's address for the ranks: the head's host (a wildcard one is
// not an address to reach; those ranks are local then).
std::string store_host(const ClusterConfig& config) {
  const std::string& h = config.head().host;
  return h.empty() || h == "0.0.0.0" || h == "::" ? "127.0.0.1" : h;
}

}  // namespace

Result<std::unique_ptr<LearnerRanks>> LearnerRanks::start(const LearnerRanksOptions& o, const Logger& log) {
  GroupOptions wanted;
  wanted.world = o.world;
  wanted.device = o.device;
  wanted.collectives = o.collectives;
  if (auto nccl = uses_nccl(wanted); !nccl) return nccl.error();  // before any process is started
  std::unique_ptr<LearnerRanks> r(new LearnerRanks());
  r->log_ = log;
  auto store = RendezvousStore::serve(o.host, 0, o.timeout);
  if (!store) return store.error();
  r->store_ = std::move(*store);
  const std::uint16_t port = r->store_->port();
  log->info("learner group: {} ranks, rendezvous at {}:{}", o.world, o.host, port);
  for (int rank = 1; rank < o.world; ++rank) {
    auto pid = spawn_rank(o, rank, port, log);
    if (!pid) {
      r->stop(std::chrono::milliseconds(0));
      return pid.error();
    }
    r->pids_.push_back(*pid);
  }
  auto group = LearnerGroup::join(GroupOptions{0, o.world, o.host, port, o.timeout, o.device, o.collectives});
  if (!group) {
    r->stop(std::chrono::milliseconds(0));
    return group.error();
  }
  r->group_ = std::move(*group);
  // Every rank has joined (join ends with a barrier of all ranks): the
  // store, which anyone who reaches the head could write to, is no longer
  // needed and stops listening.
  r->store_.reset();
  log->info("learner group formed: {} ranks, tensors over {}; rendezvous store closed", o.world,
            r->group_->transport());
  return r;
}

Result<std::unique_ptr<LearnerRanks>> LearnerRanks::start_for(const ClusterConfig& config,
                                                               const std::filesystem::path& config_file,
                                                               const std::string& binary, const Logger& log,
                                                               const RemoteStarter& remote) {
  if (config.learner.ranks <= 1) return std::unique_ptr<LearnerRanks>();
  std::error_code ec;
  if (config_file.has_parent_path()) std::filesystem::create_directories(config_file.parent_path(), ec);
  {
    std::ofstream out(config_file, std::ios::trunc);
    out << to_toml(config);
    if (!out) return make_error(Errc::io, "cannot write " + config_file.string());
  }
  LearnerRanksOptions o;
  o.world = static_cast<int>(config.learner.ranks);
  o.binary = binary.empty() ? std::filesystem::read_symlink("/proc/self/exe", ec).string() : binary;
  o.config_file = std::filesystem::absolute(config_file, ec);  // ranks on other hosts find it at the same path
  o.host = store_host(config);
  for (const auto& node : config.nodes)
    for (std::int64_t k = 0; k < node.learner_ranks; ++k) o.places.push_back(node);
  o.remote = remote;
  o.device = config.learner.device;
  o.collectives = config.learner.collectives;
  return start(o, log);
}

int LearnerRanks::stop(std::chrono::milliseconds grace) {
  if (group_) {
    release_learner_ranks(*group_);
    group_.reset();
  }
  int unclean = 0;
  for (const auto& r : reap_children(pids_, grace)) {
    if (r.clean) continue;
    ++unclean;
    if (log_) log_->warn("learner rank process {} ended: {}", r.pid, r.how);
  }
  pids_.clear();
  return unclean;
}

LearnerRanks::~LearnerRanks() { stop(); }

}  // namespace rlx
