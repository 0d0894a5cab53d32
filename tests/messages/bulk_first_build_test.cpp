// Messages whose bulk is written into memory nobody zeroed
// (codec_detail::build_bulk_first): over any garbage they have the bytes
// they have over zeroed memory.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/codec_detail.hpp"
#include "messages/weight_chunks.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

std::vector<std::uint8_t> bytes_of(const WireBuffer& b) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(b.bytes().data());
  return {p, p + b.size()};
}

// The bytes `make` encodes when builders' space starts as `fill`.
template <class Make>
std::vector<std::uint8_t> encoded_over(int fill, Make&& make) {
  codec_detail::fill_builder_space_for_tests(fill);
  auto bytes = bytes_of(make());
  codec_detail::fill_builder_space_for_tests(-1);
  return bytes;
}

// Over zeroed space, and over two patterns of garbage.
template <class Make>
void same_bytes_over_garbage(Make&& make) {
  const auto zeroed = encoded_over(0, make);
  CHECK(encoded_over(0xa5, make) == zeroed);
  CHECK(encoded_over(0xff, make) == zeroed);
}

// A token segment of odd sizes (blobs that end inside a word), long task
// ids and hints, masked steps and per-token versions.
Segment odd_token_segment() {
  const std::uint32_t T = 7, B = 3;
  Segment s = test::make_segment(T, B, 4);
  s.obs_dim = 0;
  s.observations.clear();
  s.bootstrap_observations.clear();
  s.episode_returns = {1.0f, 0.5f, 0.0f};
  s.episode_lengths = {4, 3, 2};
  s.mask_episode(3, 6, 1, InfraFailure::reward_timeout);
  TokenRows k;
  k.prompt_width = 3;
  k.prompt_lengths = {3, 2, 1};
  k.route_width = 3;
  k.routes.assign(std::size_t{T} * B * 3, 2);
  k.group_size = 3;
  k.task_ids = {std::string(300, 'a'), "b", std::string(17, 'c')};
  k.hints = {"", std::string(900, 'h'), "x"};
  k.observed.assign(std::size_t{T} * B, 0);
  k.versions.assign(std::size_t{T} * B, 4);
  s.tokens = k;
  return s;
}

}  // namespace

TEST_CASE("a segment encoded over garbage memory has the bytes of one encoded over zeroed memory",
          "[messages][codec][bulk_first]") {
  SECTION("CartPole-shaped, blobs ending inside a word") {
    Segment s = test::make_segment(5, 3, 2);  // 15 flags a column: a word's padding to write
    s.truncation_observations.assign(4, 0.25f);
    s.truncated[4] = 1;
    same_bytes_over_garbage([&] { return encode(s, "explorer/1"); });
    auto back = decode<Segment>(encode(s, "explorer/1"));
    REQUIRE(back.ok());
    CHECK(back->terminated == s.terminated);
  }
  SECTION("a token segment with long texts, masked steps and per-token versions") {
    const Segment s = odd_token_segment();
    same_bytes_over_garbage([&] { return encode(s, std::string(70, 's')); });
    auto back = decode<Segment>(encode(s, "explorer/2"));
    REQUIRE(back.ok());
    CHECK(back->tokens->hints == s.tokens->hints);
    CHECK(back->masked == s.masked);
  }
}

// The stream framing's first word: the number of segments less one.
std::uint32_t extra_segments(const WireBuffer& b) {
  std::uint32_t n = 0;
  std::memcpy(&n, b.bytes().data(), sizeof(n));
  return n;
}

TEST_CASE("segments are built in place as one segment, their bulk first and the structure after it",
          "[messages][codec][bulk_first]") {
  CHECK(extra_segments(encode(test::make_segment(64, 16, 3), "explorer/0")) == 0);
  CHECK(extra_segments(encode(odd_token_segment(), std::string(70, 's'))) == 0);
}

TEST_CASE("a structure larger than its room continues in a zeroed segment of its own, never over garbage",
          "[messages][codec][bulk_first]") {
  const Segment s = odd_token_segment();
  const auto bulk = [&](capnp::Orphanage o) { return codec_detail::tensor_orphan(o, s.actions); };
  const auto structure = [&](auto body, capnp::Orphan<capnp::Data>& actions) {
    auto seg = body.initSegment();
    seg.setNumSteps(s.num_steps);
    codec_detail::set_tensor_adopting<std::int64_t>(seg.initActions(), {s.num_steps, s.num_envs}, actions);
    auto ids = seg.initTokens().initTaskIds(4);
    for (unsigned i = 0; i < 3; ++i) ids.set(i, s.tokens->task_ids[i]);
    ids.set(3, std::string(12'000, 'z'));  // past any first segment's least size
  };
  // No room for the structure (four texts among it, one of 12 KB): it
  // goes on in a new segment, and the message is flattened with a copy.
  const auto built = [&] {
    return codec_detail::build_bulk_first("x", bulk, structure, (s.actions.size() * 8 + 7) / 8, 0);
  };
  const auto zeroed = encoded_over(0, built);
  CHECK(encoded_over(0xa5, built) == zeroed);
  const auto bytes = encoded_over(0xa5, built);
  CHECK(extra_segments(WireBuffer::copy_of(bytes.data(), bytes.size())) > 0);

  // The pattern shows wherever a builder leaves memory unzeroed: a struct
  // built there keeps it in the fields not set (what the test above
  // would see, had the structure been built over it).
  const auto unzeroed = [&] {
    codec_detail::FlatBuilder message(64, false, /*bulk_first=*/true);
    message.initRoot<wire::Envelope>().setSchemaVersion(1);
    return message.finish();
  };
  CHECK(encoded_over(0xa5, unzeroed) != encoded_over(0, unzeroed));
}

TEST_CASE("a weight set encoded in place over garbage memory has the bytes and checksum of one over zeroed memory",
          "[messages][weights][bulk_first]") {
  WeightSetLayout layout;
  layout.version = 3;
  layout.policy_kind = "mlp";
  layout.tensors = {{"a.weight", {3, 5}}, {std::string(40, 'n'), {7}}, {"c.bias", {2}}};  // 15 and 7 floats: odd
  const auto fill = [](std::size_t i, void* bytes, std::uint64_t first, std::uint64_t n) {
    auto* into = static_cast<float*>(bytes);
    for (std::uint64_t k = 0; k < n; ++k)
      into[k] = 0.5f * static_cast<float>(i) + 0.125f * static_cast<float>(first + k);
  };
  const auto make = [&] { return encode_weight_set(layout, fill, "learner").buf; };
  same_bytes_over_garbage(make);
  // A copy of the bytes (what another node gets) is hashed in full.
  const auto bytes = encoded_over(0xa5, make);
  auto back = decode<WeightSetData>(WireBuffer::copy_of(bytes.data(), bytes.size()));
  REQUIRE(back.ok());
  REQUIRE(back->tensors.size() == 3);
  CHECK(back->tensors[1].values[6] == 0.5f + 0.75f);
}

TEST_CASE("a weight chunk sent as a delta over garbage memory has the bytes of one over zeroed memory",
          "[messages][weights][bulk_first]") {
  auto older = test::make_weight_set(1, 1001);
  auto newer = older;
  newer.version = 2;
  for (std::size_t i = 0; i < newer.tensors[0].values.size(); i += 3) newer.tensors[0].values[i] += 1e-4f;
  const WireBuffer base = encode(older, "learner"), set = encode(newer, "learner");
  const DeltaBase delta_base{1, base};
  const auto make = [&] { return *encode_weight_chunk(set, 2, 0, 1000, "head", &delta_base); };
  same_bytes_over_garbage(make);
  auto chunk = decode<WeightChunkData>(make());
  REQUIRE(chunk.ok());
  CHECK(chunk->delta);
  CHECK(chunk->base == 1);
}
