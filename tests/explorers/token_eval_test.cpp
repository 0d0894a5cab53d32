// The held-out evaluator's accounting: pass@1 and its split by task family.
#include "tests/torch_catch.hpp"

#include "envs/tokens/tokenizer.hpp"
#include "explorers/token_eval.hpp"

using namespace rlx;

namespace {

// Passes every task of one family, whatever the program says.
class FamilyScorer : public Scorer {
 public:
  explicit FamilyScorer(std::string family) : family_(std::move(family)) {}
  RewardResultData score(const RewardRequestData& request) const override {
    RewardResultData r;
    r.request_id = request.request_id;
    r.score = request.task.rfind(family_ + ":", 0) == 0 ? 1.0F : 0.25F;
    return r;
  }

 private:
  std::string family_;
};

MoETransformer tiny_model() {
  TransformerOptions o;
  o.vocab = Tokenizer::characters()->vocab();
  o.d_model = 16;
  o.heads = 2;
  o.layers = 1;
  o.expert_hidden = 16;
  return make_seeded_transformer(o, 3);
}

}  // namespace

TEST_CASE("held-out pass@1 is split by code task family, every task counted in one family", "[explorers][tokens]") {
  auto model = tiny_model();
  TokenEvalOptions o;
  o.kind = "code";
  o.tasks = 21;  // three tasks of each of the 7 families (the family is the seed modulo 7)
  o.max_new_tokens = 2;
  o.batch = 8;
  const auto ev = evaluate_tokens(model, FamilyScorer("sum_list"), o);
  REQUIRE(ev.tasks == 21);
  CHECK(ev.pass_at_1 == Approx(3.0 / 21.0));
  REQUIRE(ev.by_family.size() == 7);
  int scored = 0;
  for (const auto& [family, counts] : ev.by_family) {
    CHECK(counts.second == 3);
    CHECK(counts.first == (family == "sum_list" ? 3 : 0));
    scored += counts.second;
  }
  CHECK(scored == ev.tasks);
  const auto summary = family_summary(ev);
  CHECK(summary.find("sum_list 3/3") != std::string::npos);
  CHECK(summary.find("add_k 0/3") != std::string::npos);
}

TEST_CASE("a task kind without families is counted under its own name", "[explorers][tokens]") {
  auto model = tiny_model();
  TokenEvalOptions o;
  o.kind = "arithmetic";
  o.tasks = 5;
  o.max_new_tokens = 2;
  const auto ev = evaluate_tokens(model, FamilyScorer("none"), o);
  REQUIRE(ev.by_family.size() == 1);
  CHECK(ev.by_family.begin()->first == "arithmetic");
  CHECK(ev.by_family.begin()->second == std::pair<int, int>{0, 5});
  CHECK(family_summary(ev) == "arithmetic 0/5");
}
