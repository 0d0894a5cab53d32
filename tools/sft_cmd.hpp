// `rlx sft`: the supervised start of the token policy. Trains the MoE
// transformer on (task, reference) pairs the task family generates, or on
// the expert's transcripts of workspace episodes (its turns as targets, the
// tools' outputs as context), shows progress, scores pass@1 on the
// held-out tasks, and writes the weights for RL to start from.
// docs/token-policy.md, docs/workspace.md.
#pragma once

#include <cstdint>
#include <string>

namespace rlx {

struct SftArgs {
  std::string kind = "code";     // token task kind (arithmetic | code | workspace)
  // A cluster.toml: the policy's shape ([policy]), the task kind (run.env)
  // and, for workspace episodes, their shape ([tokens]); what RL will
  // start from then fits it. Needed for workspace. Its [policy] init, when
  // set, is where training starts (continued supervised training).
  std::string config;
  // Where training starts instead of the config's [policy] init (a weights
  // file or "hf:DIR"; with hf:, the policy's shape is that checkpoint's).
  std::string init;
  bool fresh = false;            // fresh weights whatever [policy] init says (to make the start it names)
  int steps = 300;
  // Stops after the step that ends past this many seconds of training
  // (evaluations included), if it comes before --steps: RL's fair
  // baseline for the same time. 0: no limit.
  double seconds = 0;
  int batch = 32;                // (task, reference) pairs per step
  // Workspace: one-hole drills per step besides the batch's transcripts
  // (any function of a training project made the hole; read and fix,
  // nothing run: expert_drill).
  int drills = 0;
  // Workspace: recovery drills per step besides those: a drill that
  // starts with a mistaken call and its error, kept as context, then the
  // read and the fix (recovery_drill).
  int recoveries = 0;
  double lr = 1e-3;
  std::uint64_t seed = 1;
  int eval_every = 100;          // steps between held-out evaluations (0: only at the end)
  int eval_tasks = 64;
  int threads = 2;
  std::string device = "cpu";    // where the model trains (cpu | cuda | cuda:N); evaluated and saved from a CPU copy
  std::string out = "runs/sft/policy.pt";
};

// 0: trained and written; 2: bad arguments, no scorer here, a device
// this build or machine lacks, or the weights could not be written.
int sft_command(const SftArgs& args);

}  // namespace rlx
