// rlx-gpu-bench: the MoE transformer's training step and weight publish on
// one device (bench/gpu/moe_step.hpp). bench/gpu/run.sh runs the whole
// GPU measurement with it; on a CPU it runs the same code (a smoke test).
//
//   rlx-gpu-bench --device cuda --dtype bf16 --shape gpu --steps 20 --peak-tflops 989 --md results.md
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "bench/gpu/moe_step.hpp"

namespace {

using rlx::TransformerOptions;

// The model shapes measured: the code policy of examples/code.toml, a
// GPU-sized MoE (1024 wide, 8 layers, 8 experts top-2), and a tiny one.
bool shape_of(const std::string& name, TransformerOptions& m, std::int64_t& batch, std::int64_t& seq) {
  m = TransformerOptions{};
  if (name == "code") {
    batch = 64, seq = 256;
  } else if (name == "gpu") {
    m.d_model = 1024, m.heads = 16, m.layers = 8, m.experts = 8, m.top_k = 2, m.expert_hidden = 1024;
    m.max_len = 1024;
    batch = 16, seq = 1024;
  } else if (name == "tiny") {
    m.d_model = 32, m.heads = 2, m.layers = 2, m.experts = 4, m.top_k = 2, m.expert_hidden = 64, m.max_len = 64;
    batch = 4, seq = 32;
  } else {
    return false;
  }
  return true;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "rlx-gpu-bench: %s\n"
               "usage: rlx-gpu-bench [--device cpu|cuda|cuda:N] [--dtype bf16|fp32] [--shape code|gpu|tiny]\n"
               "                     [--batch N] [--seq N] [--steps N] [--warmup N] [--matmul-n N]\n"
               "                     [--publish-rounds N] [--peak-tflops X] [--md FILE]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a{{"--device", "cpu"}, {"--dtype", "bf16"}, {"--shape", "code"},
                                       {"--steps", "5"},    {"--warmup", "2"},    {"--matmul-n", "4096"},
                                       {"--publish-rounds", "3"}};
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "-h" || key == "--help") return usage("the MoE transformer's training step and weight publish");
    if (i + 1 >= argc) return usage(("no value for " + key).c_str());
    a[key] = argv[i + 1];
  }
  static const char* known[] = {"--device", "--dtype",   "--shape",          "--batch",       "--seq", "--steps",
                                "--warmup", "--matmul-n", "--publish-rounds", "--peak-tflops", "--md"};
  for (const auto& [k, v] : a)
    if (std::find(std::begin(known), std::end(known), k) == std::end(known))
      return usage(("unknown option " + k).c_str());

  rlx::StepBenchOptions o;
  if (!shape_of(a["--shape"], o.model, o.batch, o.seq)) return usage("--shape must be code, gpu or tiny");
  if (a["--dtype"] == "bf16") o.dtype = torch::kBFloat16;
  else if (a["--dtype"] == "fp32") o.dtype = torch::kFloat32;
  else return usage("--dtype must be bf16 or fp32");
  o.device = a["--device"];
  try {
    if (a.count("--batch")) o.batch = std::stoll(a["--batch"]);
    if (a.count("--seq")) o.seq = std::stoll(a["--seq"]);
    o.steps = std::stoi(a["--steps"]);
    o.warmup = std::stoi(a["--warmup"]);
    o.matmul_n = std::stoll(a["--matmul-n"]);
  } catch (const std::exception&) {
    return usage("a numeric option is not a number");
  }
  if (o.batch < 1 || o.seq < 2 || o.seq > o.model.max_len || o.steps < 1 || o.warmup < 1 || o.matmul_n < 1)
    return usage("need batch >= 1, 2 <= seq <= the shape's max_len, steps >= 1, warmup >= 1");
  const double peak = a.count("--peak-tflops") ? std::atof(a["--peak-tflops"].c_str()) : 0.0;
  const std::string what = a["--shape"] + " shape, " + a["--dtype"] + ", " + o.device;

  try {
    const auto s = rlx::run_step_bench(o);
    const auto p = rlx::run_publish_bench(o.model, o.device, o.dtype, std::stoi(a["--publish-rounds"]));
    std::printf("%s: %lld parameters, %lld x %lld tokens a step\n", what.c_str(), static_cast<long long>(s.parameters),
                static_cast<long long>(o.batch), static_cast<long long>(o.seq));
    std::printf("  training step %.2f ms, %.0f tokens/s, %.3g GFLOP/token -> %.3g TFLOP/s (loss %.3f -> %.3f)\n",
                s.step_s * 1e3, s.tokens_per_s, s.flops_per_token / 1e9, s.model_tflops, s.first_loss, s.last_loss);
    std::printf("  stages, synchronised: forward + losses %.2f ms, backward %.2f ms, Adam %.2f ms\n", s.forward_s * 1e3,
                s.backward_s * 1e3, s.optimizer_s * 1e3);
    std::printf("  dense %lld^3 product in the same dtype: %.3g TFLOP/s; step/product %.3f", static_cast<long long>(o.matmul_n),
                s.matmul_tflops, s.model_tflops / s.matmul_tflops);
    if (peak > 0) std::printf("; MFU against %.0f TFLOP/s peak %.3f", peak, s.model_tflops / peak);
    std::printf("\n  publish %.0f MB: export %.1f ms + import %.1f ms; raw device->host copy %.1f ms (%.1f GB/s); %s\n",
                p.bytes / 1e6, p.export_s * 1e3, p.import_s * 1e3, p.raw_copy_s * 1e3, p.bytes / p.raw_copy_s / 1e9,
                p.checksums_match ? "explorer's copy matches" : "EXPLORER'S COPY DIFFERS");
    if (p.encode_s > 0)
      std::printf("  publish as a learner does (encode_module_weights + the store's check): %.1f ms; %s\n", p.encode_s * 1e3,
                  p.encoded_matches ? "checksum matches" : "CHECKSUM DIFFERS");
    if (a.count("--md")) {
      std::ofstream md(a["--md"], std::ios::app);
      char line[1024], mfu[64] = "-";
      if (peak > 0) std::snprintf(mfu, sizeof mfu, "%.3f against %.0f TFLOP/s", s.model_tflops / peak, peak);
      std::snprintf(line, sizeof line,
                    "| training step, %s (%lld x %lld tokens) | %.0f tokens/s, %.3g TFLOP/s | %.3g TFLOP/s dense %lld^3 "
                    "product | %.3f | MFU %s; forward %.1f + backward %.1f + Adam %.1f ms |\n",
                    what.c_str(), static_cast<long long>(o.batch), static_cast<long long>(o.seq), s.tokens_per_s,
                    s.model_tflops, s.matmul_tflops, static_cast<long long>(o.matmul_n), s.model_tflops / s.matmul_tflops,
                    mfu, s.forward_s * 1e3, s.backward_s * 1e3, s.optimizer_s * 1e3);
      md << line;
      std::snprintf(line, sizeof line,
                    "| weight publish to an explorer, %s (%.0f MB fp32) | %.1f ms (export %.1f + import %.1f) | %.1f ms "
                    "raw device->host copy | %.2f | checksum %s |\n",
                    what.c_str(), p.bytes / 1e6, (p.export_s + p.import_s) * 1e3, p.export_s * 1e3, p.import_s * 1e3,
                    p.raw_copy_s * 1e3, (p.export_s + p.import_s) / p.raw_copy_s, p.checksums_match ? "matches" : "DIFFERS");
      md << line;
      if (p.encode_s > 0) {
        std::snprintf(line, sizeof line,
                      "| learner publish into the store's message, %s (encode_module_weights, %.0f MB fp32) | %.1f ms | "
                      "%.1f ms raw device->host copy | %.2f | checksum %s |\n",
                      what.c_str(), p.bytes / 1e6, p.encode_s * 1e3, p.raw_copy_s * 1e3, p.encode_s / p.raw_copy_s,
                      p.encoded_matches ? "matches" : "DIFFERS");
        md << line;
      }
    }
    return p.checksums_match && (p.encode_s == 0 || p.encoded_matches) ? 0 : 1;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "rlx-gpu-bench: %s: %s\n", what.c_str(), e.what_without_backtrace());
    return 1;
  }
}
