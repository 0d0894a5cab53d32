#include "learner/learner_ranks.hpp"

#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "learner/learner_core.hpp"

namespace rlx {

namespace {

pid_t spawn_rank(const LearnerRanksOptions& o, int rank, std::uint16_t port) {
  std::vector<std::string> args{o.binary,    "learner-rank", "--config", o.config_file.string(), "--rank",
                                std::to_string(rank), "--world", std::to_string(o.world), "--store",
                                o.host + ":" + std::to_string(port)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: die with the head; leave Ctrl-C to the head, which drains and
  // releases the ranks.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

Result<std::unique_ptr<LearnerRanks>> LearnerRanks::start(const LearnerRanksOptions& o, const Logger& log) {
  std::unique_ptr<LearnerRanks> r(new LearnerRanks());
  r->log_ = log;
  auto store = RendezvousStore::serve(o.host, 0, o.timeout);
  if (!store) return store.error();
  r->store_ = std::move(*store);
  const std::uint16_t port = r->store_->port();
  log->info("learner group: {} ranks, rendezvous at {}:{}", o.world, o.host, port);
  for (int rank = 1; rank < o.world; ++rank) {
    const pid_t pid = spawn_rank(o, rank, port);
    if (pid < 0) {
      r->stop(std::chrono::milliseconds(0));
      return make_error(Errc::io, std::string("cannot start learner rank: ") + std::strerror(errno));
    }
    r->pids_.push_back(pid);
  }
  auto group = LearnerGroup::join(GroupOptions{0, o.world, o.host, port, o.timeout}, r->store_.get());
  if (!group) {
    r->stop(std::chrono::milliseconds(0));
    return group.error();
  }
  r->group_ = std::move(*group);
  return r;
}

Result<std::unique_ptr<LearnerRanks>> LearnerRanks::start_for(const ClusterConfig& config,
                                                               const std::filesystem::path& config_file,
                                                               const std::string& binary, const Logger& log) {
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
  o.config_file = config_file;
  return start(o, log);
}

int LearnerRanks::stop(std::chrono::milliseconds grace) {
  if (group_) {
    release_learner_ranks(*group_);
    group_.reset();
  }
  int unclean = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t pid : pids_) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a child's exit, bounded by grace
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++unclean;
      if (log_) log_->warn("learner rank process {} did not exit in time: killed", pid);
    } else if (done > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++unclean;
      if (log_)
        log_->warn("learner rank process {} ended with {} {}", pid, WIFEXITED(status) ? "exit code" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  pids_.clear();
  return unclean;
}

LearnerRanks::~LearnerRanks() { stop(); }

}  // namespace rlx
