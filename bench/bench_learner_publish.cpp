// What a learner's publish costs before the set leaves it: the weights of
// a policy into the WeightSet message the weight store takes, and the
// store's check of it. Before: export_weights (vectors), encode (a second
// copy), the store's checksum pass; now: encode_module_weights (one copy
// into recycled memory, hashed as written; the store walks the structure
// only). Baseline: one memcpy of the same bytes into memory already
// mapped, in the same run (docs/results/across-nodes.md "A learner's publish").
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "bench/common.hpp"
#include "core/error.hpp"
#include "messages/codec.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/weights_io.hpp"
#include "policy/weights_wire.hpp"

namespace rlx {
namespace {

struct PublishCost {
  double before = 0, now = 0, copy = 0;
};

PublishCost publish_cost(const torch::nn::Module& m, int rounds) {
  std::size_t floats = 0;
  for (const auto& p : m.parameters()) floats += static_cast<std::size_t>(p.numel());
  std::vector<float> from(floats, 0.5f), into(floats, 0.0f);
  std::vector<double> before, now, copy;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    auto t = Clock::now();
    {
      const WireBuffer buf = encode(export_weights(m, 1, "bench"), "learner");
      RLX_REQUIRE(check_weight_set(buf).ok(), "bench set");
    }
    const double b = seconds_since(t);
    t = Clock::now();
    {
      const auto e = encode_module_weights(m, 1, "bench", 0, "learner");
      RLX_REQUIRE(check_weight_set(e.buf).ok(), "bench set");
    }
    const double n = seconds_since(t);
    t = Clock::now();
    std::memcpy(into.data(), from.data(), floats * sizeof(float));
    const double c = seconds_since(t);
    if (r > 0) before.push_back(b), now.push_back(n), copy.push_back(c);
  }
  return {median(before), median(now), median(copy)};
}

}  // namespace

std::vector<Row> bench_learner_publish() {
  std::vector<Row> rows;
  torch::NoGradGuard guard;
  const auto row = [&](const std::string& what, const torch::nn::Module& m, int rounds) {
    const auto c = publish_cost(m, rounds);
    std::fprintf(stderr, "  %s: before %.2f ms, now %.2f ms, memcpy %.2f ms\n", what.c_str(), c.before * 1e3,
                 c.now * 1e3, c.copy * 1e3);
    rows.push_back({"learner publish into the store's message, " + what,
                    fmt::format("{:.2f} ms (before: {:.2f} ms)", c.now * 1e3, c.before * 1e3),
                    fmt::format("{:.2f} ms memcpy of the bytes", c.copy * 1e3), fmt::format("{:.2f}", c.copy / c.now),
                    fmt::format("before / now {:.2f}; encode + the store's check, median of {}", c.before / c.now, rounds)});
  };
  // The code policy (examples/code.toml): 720 K parameters in many tensors.
  auto code = make_seeded_transformer(TransformerOptions{}, 1);
  row("code policy (720 K params)", *code, 20);
  // 25 M parameters in one matrix (100 MB), as bench_nodes' sets.
  torch::nn::Linear big(torch::nn::LinearOptions(5000, 5000).bias(false));
  row("25 M params (100 MB)", *big, 7);
  return rows;
}

}  // namespace rlx
