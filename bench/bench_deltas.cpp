// Weight deltas (issue 27): the bytes a version costs on the wire as
// deltas against the one before (messages/weight_delta.hpp), against
// its raw bytes, for consecutive versions of real policies trained by
// Adam at their configs' rates: CartPole's MLP, the agent workload's token
// policy in float32, and a bfloat16 export of the same. Also the time to
// cut and apply them against cutting and assembling raw chunks.
#include <cstring>

#include <fmt/format.h>
#include <torch/torch.h>

#include "bench/common.hpp"
#include "core/config.hpp"
#include "core/safetensors.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"
#include "policy/hf_checkpoint.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/weights_io.hpp"

namespace rlx {
namespace {

constexpr int kVersions = 6;

// Serialised weight sets of `module` after each of `steps` optimiser steps of `loss`.
template <typename Loss>
std::vector<WireBuffer> trained_versions(torch::nn::Module& module, double lr, const std::string& kind, Loss loss) {
  torch::optim::Adam adam(module.parameters(), torch::optim::AdamOptions(lr));
  std::vector<WireBuffer> sets;
  for (int v = 1; v <= kVersions; ++v) {
    adam.zero_grad();
    loss().backward();
    adam.step();
    sets.push_back(encode(export_weights(module, static_cast<std::uint64_t>(v), kind), "bench"));
  }
  return sets;
}

// The same versions as bfloat16 (what an export in that type would ship).
std::vector<WireBuffer> as_bf16(const std::vector<WireBuffer>& sets) {
  std::vector<WireBuffer> out;
  for (const auto& s : sets) {
    auto w = decode<WeightSetData>(s);
    RLX_REQUIRE(w.ok(), "bench set");
    std::vector<std::uint16_t> half;
    for (const auto& t : w->tensors)
      for (float x : t.values.span()) half.push_back(f32_to_bf16(x));
    out.push_back(WireBuffer::copy_of(half.data(), half.size() * 2));
  }
  return out;
}

struct DeltaFigures {
  double share = 0;          // delta bytes / raw bytes, over versions 2..N
  double cut_apply_s = 0;    // cutting + assembling every chunk as deltas
  double raw_s = 0;          // the same, raw
  std::uint64_t raw_bytes = 0;
};

DeltaFigures measure(const std::vector<WireBuffer>& sets, std::uint64_t chunk_bytes) {
  DeltaFigures f;
  std::uint64_t raw = 0, delta = 0;
  for (std::size_t v = 1; v < sets.size(); ++v) {
    const DeltaBase base{v, sets[v - 1]};
    for (const bool deltas : {false, true}) {
      const auto t0 = Clock::now();
      ChunkAssembler into(v + 1, sets[v].size(), chunk_bytes);
      into.set_base(base);
      for (std::uint32_t i = 0; i < into.count(); ++i) {
        auto c = encode_weight_chunk(sets[v], v + 1, i, chunk_bytes, "bench", deltas ? &base : nullptr);
        RLX_REQUIRE(c.ok() && into.add_encoded(*c).ok(), "bench chunk");
      }
      RLX_REQUIRE(into.complete(), "bench set");
      const WireBuffer back = into.take();
      (deltas ? f.cut_apply_s : f.raw_s) += seconds_since(t0);
      RLX_REQUIRE(std::memcmp(back.bytes().data(), sets[v].bytes().data(), back.size()) == 0, "delta rebuilt the set");
      (deltas ? delta : raw) += into.wire_bytes();
    }
  }
  f.share = static_cast<double>(delta) / static_cast<double>(raw);
  f.raw_bytes = sets.back().size();
  return f;
}

Row row(const std::string& what, const DeltaFigures& f, const std::string& note) {
  return {fmt::format("weight deltas: {}", what),
          fmt::format("{:.3f} of its bytes; {:.1f} ms to cut+apply", f.share, f.cut_apply_s * 1e3 / (kVersions - 1)),
          fmt::format("{} bytes raw; {:.1f} ms raw", f.raw_bytes, f.raw_s * 1e3 / (kVersions - 1)),
          fmt::format("{:.2f}", f.share), note};
}

}  // namespace

std::vector<Row> bench_deltas(const EnvRegistry& envs) {
  std::vector<Row> rows;
  torch::manual_seed(1);
  const ClusterConfig c = bench_config(envs);
  const std::uint64_t chunk_bytes = static_cast<std::uint64_t>(c.weight_store.chunk_kb) << 10;
  {
    // CartPole: 4 floats observed, 2 actions.
    auto policy = make_seeded_policy(PolicyOptions{4, 2, c.policy.hidden, c.policy.experts, c.policy.top_k}, 1);
    const auto obs = torch::randn({512, 4});
    const auto actions = torch::randint(2, {512});
    const auto advantages = torch::randn({512});
    auto sets = trained_versions(*policy, c.learner.lr, "moe_mlp", [&] {
      auto out = policy->forward(obs);
      auto logp = torch::log_softmax(out.logits, -1).gather(1, actions.unsqueeze(1)).squeeze(1);
      return -(logp * advantages).mean() + out.value.pow(2).mean();
    });
    for (auto& r : bench_publish_deltas(envs, "CartPole MLP", sets, {1, 4})) rows.push_back(std::move(r));
    rows.push_back(row("CartPole MLP, float32", measure(sets, chunk_bytes),
                       fmt::format("cluster.toml's policy, Adam lr {} on a policy-gradient loss of 512 random "
                                   "steps; {} versions, chunks of {} KiB",
                                   c.learner.lr, kVersions, c.weight_store.chunk_kb)));
  }
  auto config = load_config("examples/agent.toml", envs.names());
  if (!config) {
    rows.push_back({"weight deltas: token policy", "skipped", "", "", config.error().message});
    return rows;
  }
  const auto tokenizer = run_tokenizer(config->tokens.tokenizer);
  auto model = make_seeded_transformer(run_transformer_options(config->policy, tokenizer->vocab()), 1);
  const std::int64_t vocab = tokenizer->vocab(), len = 256;
  const auto tokens = torch::randint(vocab, {8, len});
  const auto valid = torch::ones({8, len}, torch::kBool);
  auto sets = trained_versions(*model, config->learner.lr, "moe_transformer", [&] {
    auto out = model->forward(tokens, valid);
    return torch::nn::functional::cross_entropy(out.logits.slice(1, 0, len - 1).reshape({-1, vocab}),
                                                tokens.slice(1, 1).reshape({-1}));
  });
  const std::string how = fmt::format("examples/agent.toml's policy (seeded), Adam lr {} on next-token loss of 8x{} "
                                      "random tokens; {} versions, chunks of {} KiB",
                                      config->learner.lr, len, kVersions, c.weight_store.chunk_kb);
  rows.push_back(row("token policy, float32", measure(sets, chunk_bytes), how));
  for (auto& r : bench_publish_deltas(envs, "token policy fp32", sets, {1, 4})) rows.push_back(std::move(r));
  rows.push_back(row("token policy, bfloat16 export", measure(as_bf16(sets), chunk_bytes),
                     how + "; the tensors' bytes alone, offline"));
  return rows;
}

}  // namespace rlx
