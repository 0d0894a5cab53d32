// Decoding without copies (docs/wire.md): a decoded segment's and weight
// set's tensors are views of the received message, checked once, alive
// as long as a reader holds them; a write gives a column values of its
// own; a weight set's checksum is computed once per buffer, and a copy of
// the bytes (what crossing a node makes) is checked again.
#include <cstring>
#include <utility>

#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/stream_frame.hpp"
#include "messages/weight_chunks.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

// Whether `p` points into `buf`'s bytes.
bool inside(const void* p, const WireBuffer& buf) {
  const auto* b = reinterpret_cast<const std::byte*>(p);
  return b >= buf.bytes().data() && b < buf.bytes().data() + buf.size();
}

}  // namespace

TEST_CASE("a decoded segment's tensors are views of the message, and outlive the buffer they were read from",
          "[messages][codec][zero_copy]") {
  const Segment s = test::make_segment(16, 4, 3, 1);
  std::optional<Segment> back;
  {
    const WireBuffer buf = encode(s, "explorer/1");
    auto decoded = decode<Segment>(buf);
    REQUIRE(decoded.ok());
    const Segment* d = &*decoded;  // read through const: a non-const data() is a writer
    CHECK(d->observations.is_view());
    CHECK(d->actions.is_view());
    CHECK(d->behaviour_log_probs.is_view());
    CHECK(d->rewards.is_view());
    CHECK(d->terminated.is_view());
    CHECK(inside(d->observations.data(), buf));
    CHECK(inside(d->actions.data(), buf));
    CHECK(reinterpret_cast<std::uintptr_t>(d->actions.data()) % alignof(std::int64_t) == 0);
    back = std::move(*decoded);
  }  // the caller's buffer is gone; the segment keeps the message alive
  CHECK(back->observations == s.observations);
  CHECK(back->actions == s.actions);
  CHECK(back->rewards == s.rewards);
  CHECK(back->bootstrap_observations == s.bootstrap_observations);
}

TEST_CASE("writing to a decoded column copies it first and leaves the message as it was",
          "[messages][codec][zero_copy]") {
  const Segment s = test::make_segment(8, 2, 5);
  const WireBuffer buf = encode(s, "explorer/0");
  auto decoded = decode<Segment>(buf);
  REQUIRE(decoded.ok());
  const Segment* a = &*decoded;
  Segment edited = *a;  // copies share the view
  CHECK(std::as_const(edited).rewards.data() == a->rewards.data());
  edited.rewards[0] = 42.0f;
  edited.actions.push_back(1);
  CHECK_FALSE(edited.rewards.is_view());
  CHECK(edited.rewards[0] == 42.0f);
  CHECK(a->rewards.is_view());
  CHECK(a->rewards[0] == s.rewards[0]);
  auto again = decode<Segment>(buf);
  REQUIRE(again.ok());
  CHECK(again->rewards == s.rewards);
  CHECK(again->actions == s.actions);
}

TEST_CASE("a token segment's routes, observations and per-token versions are views, and bad ones are still refused",
          "[messages][codec][zero_copy][tokens]") {
  Segment s = test::make_segment(6, 2, 4);
  s.obs_dim = 0;
  s.observations.clear();
  s.bootstrap_observations.clear();
  s.episode_returns = {1.0f, 0.0f};
  s.episode_lengths = {3, 2};
  TokenRows k;
  k.prompt_width = 2;
  k.prompt_lengths = {2, 1};
  k.route_width = 2;
  k.routes.assign(6 * 2 * 2, 1);
  k.task_ids = {"a", "b"};
  k.observed.assign(6 * 2, 0);
  k.observed[3 * 2 + 0] = 1;  // row 0's second completion token was written by the env
  k.versions.assign(6 * 2, 4);
  s.tokens = k;
  const WireBuffer buf = encode(s, "explorer/0");
  auto decoded = decode<Segment>(buf);
  REQUIRE(decoded.ok());
  const Segment* d = &*decoded;
  REQUIRE(d->tokens);
  CHECK(d->tokens->routes.is_view());
  CHECK(d->tokens->observed.is_view());
  CHECK(d->tokens->versions.is_view());
  CHECK(inside(d->tokens->versions.data(), buf));
  CHECK(d->tokens->versions == k.versions);
  CHECK(d->tokens->observed == k.observed);

  Segment outside = s;
  outside.tokens->observed[5 * 2 + 1] = 1;  // past row 1's completion (prompt 2 + 2 tokens)
  CHECK(decode<Segment>(encode(outside, "x")).error().code == Errc::invalid_field);
  Segment in_prompt = s;
  in_prompt.tokens->observed[1 * 2 + 0] = 1;
  CHECK(decode<Segment>(encode(in_prompt, "x")).error().code == Errc::invalid_field);
  Segment older = s;
  older.tokens->versions[4 * 2 + 1] = 3;  // older than its column's version (4)
  CHECK(decode<Segment>(encode(older, "x")).error().code == Errc::invalid_field);
  Segment nan = s;
  nan.rewards[3] = std::nanf("");
  CHECK(decode<Segment>(encode(nan, "x")).error().code == Errc::invalid_field);
  Segment positive = s;
  positive.behaviour_log_probs[7] = 0.5f;
  CHECK(decode<Segment>(encode(positive, "x")).error().code == Errc::invalid_field);
}

TEST_CASE("every token of a wide segment is checked: an older version or a stray observation anywhere is refused",
          "[messages][codec][zero_copy][tokens]") {
  // Nine rows: the checks read four or thirty-two entries at a time and
  // then the rest one by one; each position is tried on its own.
  const std::uint32_t T = 12, B = 9, P = 4;
  Segment s = test::make_segment(T, B, 4);
  s.obs_dim = 0;
  s.observations.clear();
  s.bootstrap_observations.clear();
  s.episode_returns.assign(B, 0.0f);
  s.episode_lengths.assign(B, T - P);
  s.episode_lengths[8] = 3;  // the last row ends early
  for (std::uint32_t t = 0; t < T; ++t) s.policy_versions[t] = t < 6 ? 0 : 5;  // version 0 bounds nothing
  TokenRows k;
  k.prompt_width = P;
  k.prompt_lengths.assign(B, P);
  k.route_width = 1;
  k.routes.assign(std::size_t{T} * B, 0);
  k.group_size = 3;
  for (std::uint32_t b = 0; b < B; ++b) k.task_ids.push_back("t" + std::to_string(b));
  k.observed.assign(std::size_t{T} * B, 0);
  k.versions.assign(std::size_t{T} * B, 5);
  s.tokens = k;
  REQUIRE(decode<Segment>(encode(s, "x")).ok());

  int older_refused = 0, unsampled_taken = 0, stray_refused = 0, inside_taken = 0;
  for (std::uint32_t t = 0; t < T; ++t)
    for (std::uint32_t b = 0; b < B; ++b) {
      const std::size_t i = std::size_t{t} * B + b;
      Segment v = s;
      v.tokens->versions[i] = 4;  // older than 5, the column's from step 6 on
      older_refused += !decode<Segment>(encode(v, "x")).ok();
      v.tokens->versions[i] = 0;  // not sampled: never older
      unsampled_taken += decode<Segment>(encode(v, "x")).ok();
      Segment o = s;
      o.tokens->observed[i] = 1;
      const bool in_completion = t >= P && t < P + s.episode_lengths[b];
      (in_completion ? inside_taken : stray_refused) += decode<Segment>(encode(o, "x")).ok() == in_completion;
    }
  CHECK(older_refused == static_cast<int>((T - 6) * B));
  CHECK(unsampled_taken == static_cast<int>(T * B));
  CHECK(inside_taken == static_cast<int>((T - P) * (B - 1) + 3));
  CHECK(stray_refused == static_cast<int>(P * B + (T - P - 3)));
}

TEST_CASE("a segment larger than its size estimate is still one whole message", "[messages][codec][zero_copy]") {
  Segment s = test::make_segment(4, 2, 1);
  s.masked_rows.clear();
  // Long episode lists are not in the estimate: the builder grows past it.
  s.episode_returns.assign(20000, 1.0f);
  s.episode_lengths.assign(20000, 3);
  auto d = decode<Segment>(encode(s, "explorer/0"));
  REQUIRE(d.ok());
  CHECK(d->episode_lengths.size() == 20000);
  CHECK(d->observations == s.observations);
}

TEST_CASE("a weight set is hashed once per buffer: its tensors are views, a copy of its bytes is checked again",
          "[messages][codec][zero_copy][weights]") {
  const WeightSetData w = test::make_weight_set(7, 1000);
  const WireBuffer buf = encode(w, "learner");
  CHECK_FALSE(buf.checked());
  REQUIRE(check_weight_set(buf).ok());  // what a store does with a set it is handed
  CHECK(buf.checked());
  auto decoded = decode<WeightSetData>(buf);
  REQUIRE(decoded.ok());
  const WeightSetData* d = &*decoded;
  for (const auto& t : d->tensors) {
    CHECK(t.values.is_view());
    CHECK(inside(t.values.data(), buf));
  }
  CHECK(d->tensors[0].values == w.tensors[0].values);

  // The same bytes copied (as CAF does across nodes) with one float flipped:
  // unmarked, so hashed, so refused.
  std::vector<std::byte> bytes(buf.bytes().begin(), buf.bytes().end());
  const auto at = static_cast<std::size_t>(reinterpret_cast<const std::byte*>(d->tensors[0].values.data() + 3) -
                                           buf.bytes().data());
  bytes[at] ^= std::byte{0x40};
  const WireBuffer copy = WireBuffer::copy_of(bytes.data(), bytes.size());
  CHECK_FALSE(copy.checked());
  CHECK(decode<WeightSetData>(copy).error().code == Errc::invalid_field);
  CHECK(check_weight_set(copy).error().code == Errc::invalid_field);
  CHECK_FALSE(copy.checked());
}

TEST_CASE("a set assembled from chunks is marked checked only once every chunk has come",
          "[messages][weights][zero_copy]") {
  const WireBuffer set = encode(test::make_weight_set(3, 5000), "learner");
  const std::uint64_t chunk = 4096;
  ChunkAssembler whole(3, set.size(), chunk), partial(3, set.size(), chunk);
  const auto count = weight_chunk_count(set.size(), chunk);
  REQUIRE(count > 2);
  for (std::uint32_t i = 0; i < count; ++i) {
    auto c = encode_weight_chunk(set, 3, i, chunk, "store");
    REQUIRE(c.ok());
    REQUIRE(whole.add_encoded(*c).ok());
    if (i + 1 < count) REQUIRE(partial.add_encoded(*c).ok());
  }
  const WireBuffer assembled = whole.take();
  CHECK(assembled.checked());
  CHECK(std::memcmp(assembled.bytes().data(), set.bytes().data(), set.size()) == 0);
  CHECK(check_weight_set(assembled).ok());
  CHECK_FALSE(partial.take().checked());

  // A chunk damaged in flight is refused before it is placed.
  auto bad = encode_weight_chunk(set, 3, 1, chunk, "store");
  REQUIRE(bad.ok());
  std::vector<std::byte> bytes(bad->bytes().begin(), bad->bytes().end());
  bytes[bytes.size() / 2] ^= std::byte{1};
  ChunkAssembler other(3, set.size(), chunk);
  CHECK_FALSE(other.add_encoded(WireBuffer::copy_of(bytes.data(), bytes.size())).ok());
  CHECK(other.missing().size() == count);
}

TEST_CASE("a segment or weight set read into a reused stream buffer keeps its values when the buffer is read into again",
          "[messages][codec][zero_copy]") {
  // Two frames of each kind, the same size, other values: the second is
  // read over the first in the reader's reused buffer (what the bulk
  // channel's client does with every frame).
  const Segment s = test::make_segment(16, 4, 3, 1);
  Segment other = s;
  for (std::size_t i = 0; i < other.observations.size(); ++i) other.observations[i] = 9.0f;
  for (std::size_t i = 0; i < other.actions.size(); ++i) other.actions[i] = 7;
  WeightSetData w;
  w.version = 2;
  w.policy_kind = "moe_mlp";
  w.tensors.push_back(NamedTensor{"w", {256}, std::vector<float>(256, 0.5f)});
  w.checksum = w.compute_checksum();
  WeightSetData w_other = w;
  w_other.tensors[0].values.assign(256, -1.5f);
  w_other.checksum = w_other.compute_checksum();

  std::string stream;
  for (const WireBuffer& b : {encode(s, "e"), encode(other, "e"), encode(w, "s"), encode(w_other, "s")})
    stream.append(reinterpret_cast<const char*>(b.bytes().data()), b.size());
  std::size_t at = 0;
  const ReadExact read = [&](void* into, std::size_t n) -> Result<void> {
    if (at + n > stream.size()) return make_error(Errc::io, "end of stream");
    std::memcpy(into, stream.data() + at, n);
    at += n;
    return {};
  };
  kj::Array<capnp::word> reuse;
  auto first = read_stream_frame(read, 1 << 20, &reuse);
  REQUIRE(first.ok());
  CHECK(first->is_borrowed());
  auto segment = decode<Segment>(*first);
  REQUIRE(segment.ok());
  REQUIRE(read_stream_frame(read, 1 << 20, &reuse).ok());  // over the first
  auto set_frame = read_stream_frame(read, 1 << 20, &reuse);
  REQUIRE(set_frame.ok());
  auto set = decode<WeightSetData>(*set_frame);
  REQUIRE(set.ok());
  REQUIRE(read_stream_frame(read, 1 << 20, &reuse).ok());  // over the set
  CHECK(segment->observations == s.observations);
  CHECK(segment->actions == s.actions);
  CHECK(set->tensors[0].values == w.tensors[0].values);
  CHECK(set->checksum == w.checksum);
  // Without a reused buffer a frame owns its bytes and is decoded in place.
  at = 0;
  auto owned = read_stream_frame(read, 1 << 20);
  REQUIRE(owned.ok());
  CHECK_FALSE(owned->is_borrowed());
  CHECK(owned->owned().shares_storage_with(*owned));
}
