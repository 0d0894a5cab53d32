// A learner's weights encoded straight from its parameters into the
// message it publishes (policy/weights_wire.hpp): the same set, names,
// shapes, values and checksum as export_weights then encode give, from an
// fp32 and a bf16 model, with the buffer hashed once.
#include "tests/torch_catch.hpp"
#include "messages/codec.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/weights_io.hpp"
#include "policy/weights_wire.hpp"

using namespace rlx;

namespace {

// The set a learner published before: export_weights, then encode.
WeightSetData exported_then_decoded(const torch::nn::Module& m, std::uint64_t version, std::uint64_t created) {
  auto w = export_weights(m, version, "moe_mlp");
  w.created_unix_ns = created;
  auto back = decode<WeightSetData>(encode(w, "learner"));
  REQUIRE(back.ok());
  return *back;
}

void check_same(const WeightSetData& a, const WeightSetData& b) {
  CHECK(a.version == b.version);
  CHECK(a.policy_kind == b.policy_kind);
  CHECK(a.created_unix_ns == b.created_unix_ns);
  CHECK(a.checksum == b.checksum);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    CHECK(a.tensors[i].name == b.tensors[i].name);
    CHECK(a.tensors[i].shape == b.tensors[i].shape);
    CHECK(a.tensors[i].values == b.tensors[i].values);
  }
}

}  // namespace

TEST_CASE("a policy's weights encoded in place are the set export_weights gives, checksum and all",
          "[policy][weights]") {
  torch::manual_seed(3);
  MoEMlpPolicy policy(PolicyOptions{4, 2, 16, 4, 2});
  const auto e = encode_module_weights(*policy, 9, "moe_mlp", 1234, "learner");
  std::uint64_t params = 0;
  for (const auto& p : policy->parameters()) params += static_cast<std::uint64_t>(p.numel());
  CHECK(e.parameters == params);
  CHECK(e.buf.checked());  // hashed as written: the store walks its structure only
  auto back = decode<WeightSetData>(e.buf);
  REQUIRE(back.ok());
  CHECK(back->checksum == e.checksum);
  check_same(*back, exported_then_decoded(*policy, 9, 1234));
  // A copy of the bytes (what crossing a node makes) is checked in full, and passes.
  const auto copy = WireBuffer::copy_of(e.buf.bytes().data(), e.buf.size());
  CHECK_FALSE(copy.checked());
  auto info = check_weight_set(copy);
  REQUIRE(info.ok());
  CHECK(info->parameters == params);
  CHECK(info->version == 9);

  SECTION("from bf16 parameters, as export_weights converts them") {
    policy->to(torch::kBFloat16);
    const auto b = encode_module_weights(*policy, 10, "moe_mlp", 5, "learner");
    auto got = decode<WeightSetData>(b.buf);
    REQUIRE(got.ok());
    check_same(*got, exported_then_decoded(*policy, 10, 5));
    CHECK(got->checksum != back->checksum);  // rounded to bf16: other values
  }
}
