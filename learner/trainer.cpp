#include "learner/trainer.hpp"

#include <torch/torch.h>

#include <atomic>
#include <filesystem>
#include <sstream>

#include "envs/tokens/tokenizer.hpp"
#include "learner/checkpoint.hpp"
#include "learner/learner_group.hpp"
#include "learner/mlp_trainer.hpp"
#include "learner/start_weights.hpp"
#include "learner/token_policy_trainer.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/lora_base.hpp"
#include "policy/peft_adapter.hpp"

namespace rlx {

Result<void> check_device(const std::string& device) {
  try {
    const torch::Device d(device);
    if (d.is_cpu()) return {};
    if (!d.is_cuda()) return make_error(Errc::config_range, "device \"" + device + "\": only cpu and cuda are supported");
    if (!torch::cuda::is_available())
      return make_error(Errc::config_range,
                        "device \"" + device + "\" asked for, but this LibTorch has no CUDA or no GPU is visible "
                        "(build with -DRLX_CUDA=ON against a CUDA LibTorch, docs/data-parallel.md \"GPUs\")");
    const auto index = d.has_index() ? d.index() : 0;
    if (index >= static_cast<int>(torch::cuda::device_count()))
      return make_error(Errc::config_range, "device \"" + device + "\": only " +
                                                std::to_string(torch::cuda::device_count()) + " GPU(s) visible");
    return {};
  } catch (const c10::Error& e) {
    return make_error(Errc::config_range, "device \"" + device + "\": " + e.what_without_backtrace());
  }
}

Result<void> check_policy_init(const PolicyConfig& policy, const TokensConfig& tokens) {
  if (policy.kind != PolicyKind::moe_transformer || policy.init.empty()) return {};
  if (auto t = check_tokenizer(tokens.tokenizer); !t) return t.error();
  if (auto m = policy_transformer_options(policy, run_tokenizer(tokens.tokenizer)->vocab()); !m) return m.error();
  // The weights read into the model alone (no optimizer, nothing drawn
  // that the file fills), then let go.
  TrainerOptions o;
  o.policy = policy;
  o.tokens = tokens;
  const auto t = token_trainer_options(o);
  if (t.model.lora_on()) {  // the base read as the model is built: its errors are the checkpoint's
    if (const auto& base = t.model.lora_base;
        hf_init_dir(policy.init).empty() && (!std::filesystem::is_regular_file(base) || is_checkpoint_file(base)))
      return make_error(Errc::config_range,
                        "[policy] init = \"" + policy.init +
                            "\": a LoRA policy's frozen base is \"hf:DIR\" or a file of "
                            "weights `rlx sft --out` wrote (not a run's folder or a learner checkpoint)");
    auto model = make_lora_transformer(t.model, t.seed, false);
    if (!model) return model.error();
    return load_init_adapter(*model, policy.init_adapter);
  }
  auto model = t.unfilled ? make_unfilled_transformer(t.model, t.seed) : make_seeded_transformer(t.model, t.seed);
  if (auto ok = load_start_weights(model, policy.init); !ok) return ok.error();
  return {};
}

std::unique_ptr<Trainer> make_trainer(const TrainerOptions& o) {
  if (o.policy.kind != PolicyKind::moe_transformer) return std::make_unique<MlpTrainer>(o);
  auto t = std::make_unique<TokenPolicyTrainer>(token_trainer_options(o));
  // Ranks 1..N-1 take rank 0's whole state before their first update
  // (LearnerCore::train): only rank 0 reads the start's file.
  const bool other_rank = o.group != nullptr && o.group->rank() > 0;
  if (!o.policy.init.empty() && !other_rank) {
    auto ok = t->tokens().load_model_file(o.policy.init);
    RLX_REQUIRE(ok.ok(), ok.error().message);  // checked at start (check_policy_init)
    auto adapter = load_init_adapter(t->tokens().model(), o.policy.init_adapter);
    RLX_REQUIRE(adapter.ok(), adapter.error().message);
  }
  if (o.learner.kl_coef > 0) {  // the run's start, whatever checkpoint the trainer resumes from later
    auto ok = t->tokens().take_reference(o.policy.init, o.policy.init_adapter);
    RLX_REQUIRE(ok.ok(), ok.error().message);
  }
  return t;
}

Trainer::Trainer(std::string device) : device_(std::move(device)) { renew_state_id(); }
Trainer::~Trainer() = default;

void Trainer::set_version(std::uint64_t v) {
  version_ = v;
  renew_state_id();
}

void Trainer::renew_state_id() {
  static std::atomic<std::uint64_t> next{1};
  state_id_ = next.fetch_add(1);
}

Result<UpdateStats> Trainer::update(const std::vector<const Segment*>& segments) {
  for (const Segment* s : segments)
    if (auto why = refuses(*s); !why.empty()) return make_error(Errc::invalid_field, why);
  try {
    UpdateStats s = train(segments);
    ++version_;
    return s;
  } catch (const c10::Error& e) {
    // LibTorch refused the batch (a shape or value it cannot use): the
    // caller counts and drops it.
    return make_error(Errc::invalid_field, std::string("update failed: ") + e.what_without_backtrace());
  }
}

EncodedWeightSet Trainer::encoded_weights(std::uint64_t created_unix_ns) const {
  WeightSetData w = weights();
  w.created_unix_ns = created_unix_ns;
  EncodedWeightSet e;
  e.checksum = w.checksum;
  for (const auto& t : w.tensors) e.parameters += t.numel();
  e.buf = encode(w, "learner");
  return e;
}

void Trainer::write_state(const std::function<std::size_t(const void*, std::size_t)>& sink) const {
  torch::serialize::OutputArchive a;
  save(a);
  a.write("version", torch::tensor(static_cast<std::int64_t>(version_)));
  a.save_to(sink);
}

std::vector<std::uint8_t> Trainer::save_state() const {
  std::vector<std::uint8_t> out;
  write_state([&out](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
    return n;
  });
  return out;
}

Result<void> Trainer::load_state(std::span<const std::uint8_t> bytes) {
  try {
    torch::serialize::InputArchive a;
    // Onto this trainer's device: the optimizer's moments must live with its parameters.
    a.load_from(reinterpret_cast<const char*>(bytes.data()), bytes.size(), torch::Device(device_));
    torch::Tensor v;
    a.read("version", v);
    if (auto ok = load(a); !ok) return ok;
    version_ = static_cast<std::uint64_t>(v.item<std::int64_t>());
    renew_state_id();
    return {};
  } catch (const c10::Error& e) {
    return make_error(Errc::invalid_field, std::string("checkpoint: ") + e.what_without_backtrace());
  }
}

}  // namespace rlx
