// The processes of a data-parallel learner: the rendezvous store (served
// by the head, the address handed to every rank), ranks 1..N-1 started as
// `rlx learner-rank` processes on this node or on the nodes whose
// [[node]] learner_ranks place them (through that node's launcher), and
// rank 0's membership (rank 0 lives in the learner actor). Local rank
// processes die with the head (PR_SET_PDEATHSIG), ignore the terminal's
// Ctrl-C (the head drains and releases them), and are waited for at the
// end: no orphans. A rank on another host whose head died fails its next
// collective within the group timeout and exits.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include <sys/types.h>

#include "core/config.hpp"
#include "core/logging.hpp"
#include "learner/learner_group.hpp"

namespace rlx {

// Starts `argv` on `node`, a host of its own (the ssh launcher:
// tools/node_launcher.hpp); the pid is of what runs here (the ssh client).
using RemoteStarter = std::function<Result<pid_t>(const NodeConfig& node, const std::vector<std::string>& argv)>;

struct LearnerRanksOptions {
  int world = 2;
  std::string binary;                       // the rlx executable
  std::filesystem::path config_file;        // the run's TOML, for the ranks (the same path on every host)
  std::string host = "127.0.0.1";           // where the store listens: the head's address
  // The node of each rank 1..world-1 (none: all on this one, at `host`).
  // A rank runs at its node's host; one whose launcher is not local is
  // started through `remote`.
  std::vector<NodeConfig> places;
  RemoteStarter remote;
  std::chrono::milliseconds timeout{30'000};  // rendezvous and every collective
  std::string device = "cpu";               // [learner] device
  Collectives collectives = Collectives::automatic;  // [learner] collectives
};

class LearnerRanks {
 public:
  // Serves the store, starts the rank processes, joins as rank 0; fails
  // (and reaps what it started) if the group does not form in time.
  static Result<std::unique_ptr<LearnerRanks>> start(const LearnerRanksOptions& options, const Logger& log);
  // The ranks of `config` ([learner] ranks; null when 1): writes its
  // effective TOML (to_toml) to `config_file` for them and starts them.
  // `binary` empty: this process's own executable.
  static Result<std::unique_ptr<LearnerRanks>> start_for(const ClusterConfig& config,
                                                         const std::filesystem::path& config_file,
                                                         const std::string& binary, const Logger& log,
                                                         const RemoteStarter& remote = {});
  ~LearnerRanks();

  LearnerGroup* group() { return group_.get(); }
  const std::vector<pid_t>& pids() const { return pids_; }
  // Releases the ranks and waits up to `grace` for them to exit, then
  // kills what is left. Returns how many did not exit cleanly. Idempotent.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10'000));

 private:
  LearnerRanks() = default;
  std::unique_ptr<RendezvousStore> store_;
  std::unique_ptr<LearnerGroup> group_;
  std::vector<pid_t> pids_;
  Logger log_;
};

}  // namespace rlx
