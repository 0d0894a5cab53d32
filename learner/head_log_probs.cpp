#include "learner/head_log_probs.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "policy/low_precision.hpp"
#include "policy/token_rule.hpp"

namespace rlx {

std::pair<torch::Tensor, torch::Tensor> token_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens,
                                                        double temperature, const BlockedTokens& blocked) {
  const auto W = tokens.size(1);
  auto logp_all = torch::log_softmax(predicting(logits, blocked) / temperature, -1);  // predicts columns 1..W-1
  auto picked = logp_all.gather(2, tokens.narrow(1, 1, W - 1).unsqueeze(-1)).squeeze(-1);
  auto entropy = -(logp_all.exp() * logp_all).sum(-1);
  auto zero = torch::zeros({tokens.size(0), 1}, picked.options());
  return {torch::cat({zero, picked}, 1), torch::cat({zero, entropy}, 1)};
}

namespace {

// What the chunks share: the positions that predict (row b * (W - 1) + j
// predicts column j + 1), their targets, and where the rule blocked tokens.
struct HeadChunks {
  MoETransformer model{nullptr};
  torch::Tensor targets;     // [N] long
  torch::Tensor blocked_at;  // [M] long: the positions (rows) with blocked tokens
  torch::Tensor blocked;     // [M, V] bool
  double temperature = 1;
  std::int64_t rows = 1;  // positions a chunk
  std::int64_t B = 0, W = 0;

  // Log-probabilities of the targets and entropies of positions [a, e)
  // from their hidden states h [e - a, d].
  std::pair<torch::Tensor, torch::Tensor> chunk(const torch::Tensor& h, std::int64_t a, std::int64_t e) {
    auto z = model->head_logits(h);  // fp32 [e - a, V]
    if (blocked_at.defined()) {
      const auto in = (blocked_at >= a) & (blocked_at < e);
      if (in.any().item<bool>()) {
        const auto at = blocked_at.masked_select(in) - a;
        const auto mask = blocked.index_select(0, in.nonzero().squeeze(1));
        z = z.index_copy(0, at, z.index_select(0, at).masked_fill(mask, kBlockedLogit));
      }
    }
    auto logp_all = torch::log_softmax(z / temperature, -1);
    auto picked = logp_all.gather(1, targets.slice(0, a, e).unsqueeze(1)).squeeze(1);
    auto entropy = -(logp_all.exp() * logp_all).sum(-1);
    return {picked, entropy};
  }

  // [N] per position -> [B, W] with column 0 at 0.
  torch::Tensor columns(const torch::Tensor& per_position) const {
    auto zero = torch::zeros({B, 1}, per_position.options());
    return torch::cat({zero, per_position.view({B, W - 1})}, 1);
  }
};

// The chunks ride in the autograd context as a capsule.
struct Holder : torch::CustomClassHolder {
  explicit Holder(std::shared_ptr<HeadChunks> c) : chunks(std::move(c)) {}
  std::shared_ptr<HeadChunks> chunks;
};

class ChunkedHead : public torch::autograd::Function<ChunkedHead> {
 public:
  // Inputs: the predicting positions' hidden states [N, d] and the output
  // layer's trained parameters (their gradients are this function's).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                                                torch::TensorList params, std::shared_ptr<HeadChunks> chunks) {
    const auto N = hidden.size(0);
    auto logp = torch::empty({N}, hidden.options().dtype(torch::kFloat32));
    auto entropy = torch::empty({N}, logp.options());
    {
      LowPrecision low(chunks->model->low_precision(), hidden.device());  // one cast of the weights for every chunk
      for (std::int64_t a = 0; a < N; a += chunks->rows) {
        const auto e = std::min(N, a + chunks->rows);
        auto [lp, en] = chunks->chunk(hidden.slice(0, a, e), a, e);
        logp.slice(0, a, e).copy_(lp);
        entropy.slice(0, a, e).copy_(en);
      }
    }
    ctx->save_for_backward({hidden});
    ctx->saved_data["chunks"] = c10::IValue::make_capsule(c10::make_intrusive<Holder>(std::move(chunks)));
    ctx->saved_data["params"] = static_cast<std::int64_t>(params.size());
    return {logp, entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto hidden = ctx->get_saved_variables()[0];
    const auto holder = c10::static_intrusive_pointer_cast<Holder>(ctx->saved_data["chunks"].toCapsule());
    auto& chunks = *holder->chunks;
    const auto N = hidden.size(0);
    std::vector<torch::Tensor> params;
    for (auto& p : chunks.model->head_parameters()) params.push_back(p);
    RLX_REQUIRE(static_cast<std::int64_t>(params.size()) == ctx->saved_data["params"].toInt(), params.size());
    auto g_logp = grads[0].defined() ? grads[0] : torch::zeros({N}, hidden.options().dtype(torch::kFloat32));
    auto g_entropy = grads[1].defined() ? grads[1] : torch::zeros_like(g_logp);
    auto g_hidden = torch::empty_like(hidden);
    std::vector<torch::Tensor> g_params(params.size());
    torch::AutoGradMode on(true);
    LowPrecision low(chunks.model->low_precision(), hidden.device());
    for (std::int64_t a = 0; a < N; a += chunks.rows) {
      const auto e = std::min(N, a + chunks.rows);
      auto h = hidden.slice(0, a, e).detach().requires_grad_(true);
      auto [lp, en] = chunks.chunk(h, a, e);
      std::vector<torch::Tensor> inputs{h};
      inputs.insert(inputs.end(), params.begin(), params.end());
      auto g = torch::autograd::grad({lp, en}, inputs, {g_logp.slice(0, a, e), g_entropy.slice(0, a, e)},
                                     /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
      g_hidden.slice(0, a, e).copy_(g[0]);
      for (std::size_t i = 0; i < params.size(); ++i)
        if (g[i + 1].defined()) g_params[i] = g_params[i].defined() ? g_params[i] + g[i + 1] : g[i + 1];
    }
    torch::autograd::variable_list out{g_hidden};
    out.insert(out.end(), g_params.begin(), g_params.end());
    out.emplace_back();  // the chunks: not a tensor
    return out;
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> head_log_probs(MoETransformer& model, const torch::Tensor& hidden,
                                                       const torch::Tensor& tokens, double temperature,
                                                       const BlockedTokens& blocked, std::int64_t chunk_logits) {
  RLX_REQUIRE(
      hidden.dim() == 3 && tokens.dim() == 2 && hidden.size(0) == tokens.size(0) && hidden.size(1) == tokens.size(1),
      hidden.sizes(), tokens.sizes());
  auto chunks = std::make_shared<HeadChunks>();
  chunks->model = model;
  chunks->B = tokens.size(0), chunks->W = tokens.size(1);
  const auto B = chunks->B, W = chunks->W, d = hidden.size(2);
  chunks->temperature = temperature;
  chunks->rows = std::max<std::int64_t>(1, chunk_logits / model->options().vocab);
  chunks->targets = tokens.narrow(1, 1, W - 1).reshape({B * (W - 1)});
  if (!blocked.empty()) {
    // Flat position b * W + j predicts column j + 1 = the blocked column; as a row of the positions: b * (W - 1) + j.
    const auto by = blocked.at - 1;
    chunks->blocked_at = torch::div(by, W, "floor") * (W - 1) + torch::remainder(by, W);
    chunks->blocked = blocked.tokens;
  }
  const auto positions = hidden.narrow(1, 0, W - 1).reshape({B * (W - 1), d});
  std::vector<torch::Tensor> params = model->head_parameters();
  auto out = ChunkedHead::apply(positions, torch::TensorList(params), chunks);
  return {chunks->columns(out[0]), chunks->columns(out[1])};
}

}  // namespace rlx
