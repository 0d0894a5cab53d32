#include "learner/start_weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "learner/checkpoint.hpp"
#include "learner/model_optimizer.hpp"
#include "policy/hf_checkpoint.hpp"

namespace rlx {

namespace fs = std::filesystem;

namespace {

// A learner checkpoint's parameters into `model` (all read and checked first).
Result<std::string> load_from_checkpoint(MoETransformer& model, const fs::path& file) {
  auto state = checkpoint_trainer_state(file);
  if (!state) return state.error();
  auto refused = [&](const std::string& why) {
    return make_error(Errc::invalid_field, file.string() + ": not weights of this policy shape (" + why + ")");
  };
  try {
    std::istringstream is(std::string(state->begin(), state->end()));
    torch::serialize::InputArchive archive;
    archive.load_from(is, torch::Device(torch::kCPU));
    torch::Tensor version;
    archive.read("version", version);
    torch::Tensor head;
    if (!model->options().copy_head && archive.try_read("param/copy.gate.bias", head))
      return refused("weights with a copy head, for a policy without one: set [policy] copy_head = true");
    std::vector<std::string> absent;
    auto read = read_saved_parameters(archive, *model, &absent);
    if (!read) return refused(read.error().message);
    auto params = model->named_parameters(true);
    const bool head_saved = std::ranges::any_of(
        params, [&](const auto& p) { return p.key().starts_with("copy.") && !std::ranges::count(absent, p.key()); });
    auto note = absent_tensors_note(absent, head_saved);  // as load_policy_init
    if (!note) return refused(note.error().message);
    torch::NoGradGuard guard;
    for (std::size_t i = 0; i < params.size(); ++i)
      if ((*read)[i].defined()) params[i].value().copy_((*read)[i]);
    auto what = fmt::format("learner checkpoint {}, version {}", file.string(), version.item<std::int64_t>());
    return note->empty() ? what : what + " (" + *note + ")";
  } catch (const c10::Error& e) {
    return refused(std::string(e.what_without_backtrace()).substr(0, 200));
  }
}

}  // namespace

Result<std::string> load_start_weights(MoETransformer& model, const std::string& init) {
  std::error_code ec;
  if (hf_init_dir(init).empty() && fs::is_directory(init, ec)) {
    const auto dir = fs::path(init) / "checkpoints";
    const auto all = list_checkpoints(dir);
    if (all.empty())
      return make_error(Errc::config_missing, init + ": a folder with no learner checkpoint in " + dir.string() +
                                                  " (weights come from a run's log_dir, a file, or hf:DIR)");
    return load_from_checkpoint(model, all.front());
  }
  if (is_checkpoint_file(init)) return load_from_checkpoint(model, init);
  auto loaded = load_policy_init(model, init);
  if (!loaded) return loaded.error();
  return loaded->empty() ? init : init + " (" + *loaded + ")";
}

}  // namespace rlx
