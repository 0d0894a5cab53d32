#include "tests/torch_catch.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include <sys/wait.h>

#include <torch/cuda.h>

#include "bench/gpu/moe_step.hpp"

using namespace rlx;

namespace {

TransformerOptions tiny_model() {
  TransformerOptions m;
  m.d_model = 32, m.heads = 2, m.layers = 2, m.experts = 4, m.top_k = 2, m.expert_hidden = 64, m.max_len = 64;
  return m;
}

}  // namespace

TEST_CASE("the training FLOPs per token count every matrix product a token passes through", "[bench]") {
  TransformerOptions m;
  m.vocab = 20, m.d_model = 16, m.heads = 2, m.layers = 2, m.experts = 4, m.top_k = 2, m.expert_hidden = 24;
  // Per layer 4*16^2 (attention) + 16*4 (router) + 2*2*16*24 (two experts)
  // = 2624; two layers and the heads 16*(20+1): 5584 weights; attention
  // over 32 keys 4*2*32*16 = 4096; training 3 * (2*5584 + 4096).
  CHECK(training_flops_per_token(m, 32) == Approx(45792));
  // Experts a token is not routed to cost nothing but their router column.
  auto wide = m;
  wide.experts = 8;
  CHECK(training_flops_per_token(wide, 32) - training_flops_per_token(m, 32) == Approx(3 * 2 * 2 * 16 * 4));
}

TEST_CASE("the GPU bench's training step runs on a CPU in bf16 and in fp32", "[bench]") {
  for (auto dtype : {torch::kBFloat16, torch::kFloat32}) {
    StepBenchOptions o;
    o.model = tiny_model();
    o.dtype = dtype;
    o.batch = 4, o.seq = 32, o.warmup = 1, o.steps = 2, o.matmul_n = 64;
    const auto r = run_step_bench(o);
    CHECK(r.tokens_per_s > 0);
    CHECK(r.model_tflops == Approx(r.tokens_per_s * r.flops_per_token / 1e12));
    CHECK(r.matmul_tflops > 0);
    // Random tokens over 99 ids: the first loss is about ln 99 = 4.6.
    CHECK(r.first_loss > 3.5);
    CHECK(r.first_loss < 6.0);
    CHECK(std::isfinite(r.last_loss));
    CHECK(r.parameters > 0);
  }
}

TEST_CASE("weights published from a bf16 learner reach the explorer's fp32 copy whole", "[bench]") {
  const auto m = tiny_model();
  const auto r = run_publish_bench(m, "cpu", torch::kBFloat16, 1);
  CHECK(r.checksums_match);
  auto model = make_seeded_transformer(m, 1);
  std::int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  CHECK(r.bytes == Approx(4.0 * static_cast<double>(n)));
  CHECK(r.export_s > 0);
  CHECK(r.raw_copy_s > 0);
  // As a learner publishes (encode_module_weights), the same checksum.
  CHECK(r.encode_s > 0);
  CHECK(r.encoded_matches);
}

TEST_CASE("asking the GPU bench for a GPU this build or machine lacks is an error, not a crash", "[bench]") {
  if (torch::cuda::is_available()) return;  // a CUDA machine runs bench/gpu/run.sh instead
  StepBenchOptions o;
  o.model = tiny_model();
  o.device = "cuda";
  o.seq = 32, o.batch = 2;
  CHECK_THROWS_AS(run_step_bench(o), c10::Error);
}

namespace {

// Runs `command`: its exit status and what it printed.
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("the GPU token-learner check passes on the CPU and refuses a GPU the machine lacks", "[bench][token][gpu]") {
  auto [status, out] = run(std::string(RLX_TOKEN_CHECK) + " --device cpu --quick");
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("ok: grpo on cpu: weights within") != std::string::npos);
  CHECK(out.find("ok: ppo on cpu: weights within") != std::string::npos);
  CHECK(out.find("FAILED") == std::string::npos);
  if (torch::cuda::is_available()) return;  // a CUDA machine runs bench/gpu/run.sh instead
  auto [cuda_status, cuda_out] = run(std::string(RLX_TOKEN_CHECK) + " --device cuda --quick");
  INFO(cuda_out);
  CHECK(cuda_status == 2);
  CHECK(cuda_out.find("needs a visible GPU") != std::string::npos);
}
