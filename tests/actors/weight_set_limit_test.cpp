// The largest weight set a node takes is a setting ([weight_store]
// max_set_mb, by default the machine's memory), not a fixed 1 GiB; a set
// over it is refused where it arrives, and a learner whose own set is over
// it stops the run at its first publish with the reason, instead of
// leaving the run waiting at v0. One row of a tensor is bounded by the
// wire (512 MiB, Cap'n Proto's largest blob; a larger tensor travels in
// rows: tests/messages/weight_rows_test.cpp), refused with the way out.
#include <unistd.h>

#include <filesystem>
#include <regex>

#include <catch2/catch.hpp>

#include "core/config.hpp"
#include "messages/codec.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("a weight set is refused over the limit a node sets, and taken under it", "[messages][weights][memory]") {
  const auto set = encode(test::make_weight_set(3, 400'000), "learner");  // 1.6 MB of floats
  REQUIRE(set.size() > (std::size_t{1} << 20));
  auto small = check_weight_set(set, weight_set_decoding(std::uint64_t{1} << 20));
  REQUIRE_FALSE(small.ok());
  CHECK(small.error().code == Errc::message_too_large);
  auto larger = check_weight_set(set, weight_set_decoding(std::uint64_t{4} << 20));
  REQUIRE(larger.ok());
  CHECK(larger->version == 3);
  CHECK(decode<WeightSetData>(set, weight_set_decoding(std::uint64_t{4} << 20)).ok());
  CHECK_FALSE(decode<WeightSetData>(set, weight_set_decoding(std::uint64_t{1} << 20)).ok());
  // The read budget grows with the limit: a 16 GiB set is not cut at 2 GiB of words.
  const auto big = weight_set_decoding(std::uint64_t{16} << 30);
  CHECK(big.max_bytes == (std::size_t{16} << 30));
  CHECK(big.traversal_limit_words >= (std::uint64_t{16} << 30) / 8);
  // 0, the default: the machine's memory.
  WeightStoreConfig store;
  CHECK(store.max_set_mb == 0);
  CHECK(store.max_set_bytes() ==
        static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE)));
  store.max_set_mb = 3;
  CHECK(store.max_set_bytes() == (std::uint64_t{3} << 20));
}

TEST_CASE(
    "a tensor whose rows are larger than a weight set carries is refused before anything is allocated, naming "
    "it and the way out",
    "[messages][weights][memory]") {
  WeightSetLayout layout;
  layout.policy_kind = "moe_transformer";
  // A Qwen3 embedding (151,936 x 1,024, 622 MB in fp32) travels in rows; a row of 2^27 fp32 values does not.
  layout.tensors = {{"blocks.0.w", {4, 4}}, {"tok_emb.weight", {151936, 1024}}};
  CHECK(oversized_tensor(layout).empty());
  layout.tensors.push_back({"wide.weight", {2, std::int64_t{1} << 27}});
  const auto why = oversized_tensor(layout);
  CHECK_THAT(why, Catch::Contains("wide.weight [2, 134217728] has rows of 512.0 MiB in fp32") &&
                      Catch::Contains("more than the 512.0 MiB") && Catch::Contains("[policy] dtype = \"bf16\"") &&
                      Catch::Contains("[policy.lora]"));
  bool filled = false;
  const auto fill = [&](std::size_t, void*, std::uint64_t, std::uint64_t) { filled = true; };
  CHECK_THROWS_WITH(encode_weight_set(layout, fill, "learner"), why);
  CHECK_FALSE(filled);
  layout.dtype = WeightDType::bf16;
  CHECK(oversized_tensor(layout).empty());
  // The bound is the blob's: a row of 2^29 - 1 bytes fits, one more does not.
  layout.dtype = WeightDType::f32;
  layout.tensors = {{"w", {3, (std::int64_t{1} << 27) - 1}}};
  CHECK(oversized_tensor(layout).empty());
  layout.tensors = {{"w", {3, std::int64_t{1} << 27}}};
  CHECK_FALSE(oversized_tensor(layout).empty());
  layout.tensors = {{"w", {std::int64_t{1} << 40}}};  // 1-D: a row is one value
  CHECK(oversized_tensor(layout).empty());
}

TEST_CASE("a learner whose weight set is over max_set_mb stops the run at its first publish, naming the size and the "
          "setting",
          "[actors][learner][weights][e2e]") {
  test::TempDir t("rlx-set-limit");
  // CartPole's policy made wide: about 4 MB of weights, over a 1 MiB limit.
  auto r = test::run_command("cd '" + t.path.string() + "' && " RLX_BINARY
                             " launch --set run.log_dir=run --set policy.hidden=512"
                             " --set weight_store.max_set_mb=1 2>&1");
  INFO(r.out);
  CHECK(r.status == 4);  // the run failed, promptly: no wait at v0
  CHECK_THAT(r.out, Catch::Contains("the weight set of v0 is ") &&
                        Catch::Contains("more than the 1.0 MiB a node takes") &&
                        Catch::Contains("[weight_store] max_set_mb"));
  CHECK(std::regex_search(r.out, std::regex("segments produced [0-9]+: trained 0 ")));
  // The same run under the default limit trains.
  auto ok = test::run_command("cd '" + t.path.string() + "' && " RLX_BINARY
                              " launch --set run.log_dir=run2 --set policy.hidden=512"
                              " --set run.stop.max_updates=2 2>&1");
  INFO(ok.out);
  CHECK(ok.status == 3);
  CHECK(std::regex_search(ok.out, std::regex("trained [1-9][0-9]* / ")));
}
