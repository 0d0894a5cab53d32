// Segments in the fixed layout (messages/segment_layout): read exactly as
// Cap'n Proto's reader reads them, whatever is changed in them; anything
// not in the layout read the general way.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/codec_detail.hpp"
#include "messages/segment_layout.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

template <class A, class B>
bool same_bytes(const A& a, const B& b) {
  const std::span<const typename A::value_type> x{a.data(), a.size()};
  const std::span<const typename B::value_type> y{b.data(), b.size()};
  return x.size_bytes() == y.size_bytes() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0;
}

// Every field, bit for bit (a NaN equals itself).
bool same_segment(const Segment& a, const Segment& b) {
  return a.explorer_id == b.explorer_id && a.sequence == b.sequence && a.num_steps == b.num_steps &&
         a.num_envs == b.num_envs && a.obs_dim == b.obs_dim && same_bytes(a.observations, b.observations) &&
         same_bytes(a.actions, b.actions) && same_bytes(a.behaviour_log_probs, b.behaviour_log_probs) &&
         same_bytes(a.rewards, b.rewards) && same_bytes(a.terminated, b.terminated) &&
         same_bytes(a.truncated, b.truncated) && a.policy_versions == b.policy_versions &&
         same_bytes(a.bootstrap_observations, b.bootstrap_observations) &&
         same_bytes(a.truncation_observations, b.truncation_observations) &&
         same_bytes(a.episode_returns, b.episode_returns) && a.episode_lengths == b.episode_lengths &&
         a.created_unix_ns == b.created_unix_ns && a.lost_episodes == b.lost_episodes &&
         a.tokens.has_value() == b.tokens.has_value() && same_bytes(a.masked, b.masked) &&
         a.masked_rows == b.masked_rows && a.infra_failures == b.infra_failures &&
         a.reward_retries == b.reward_retries && a.sent_index == b.sent_index && a.sent_base == b.sent_base &&
         same_bytes(std::vector<double>{a.work.decode_s, a.work.tool_s, a.work.score_s},
                    std::vector<double>{b.work.decode_s, b.work.tool_s, b.work.score_s}) &&
         a.work.tool_calls == b.work.tool_calls;
}

// A valid segment of T steps, B envs and D-wide observations with random
// values and, by `rng`, each optional part: time-limit cuts with their
// observations, a masked episode, failure counts, the time it took.
Segment random_segment(std::mt19937_64& rng, std::uint32_t T, std::uint32_t B, std::uint32_t D) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Segment s = test::make_segment(T, B, 1 + rng() % 5, static_cast<std::uint32_t>(rng() % 9));
  s.obs_dim = D;
  s.observations.assign(std::size_t{T} * B * D, 0.0f);
  for (auto& v : s.observations.values()) v = u(rng);
  s.bootstrap_observations.assign(std::size_t{B} * D, 0.5f);
  for (auto& v : s.actions.values()) v = static_cast<std::int64_t>(rng() % 7);
  for (auto& v : s.behaviour_log_probs.values()) v = -std::abs(u(rng));
  for (auto& v : s.rewards.values()) v = u(rng);
  s.sequence = rng();
  s.created_unix_ns = rng();
  s.sent_index = rng() % 100;
  s.sent_base = 1;
  s.lost_episodes = static_cast<std::uint32_t>(rng() % 3);
  s.episode_returns.assign(rng() % 4, 1.5f);
  s.episode_lengths.assign(s.episode_returns.size(), T);
  if (rng() % 2) {  // time limits cut some steps
    std::size_t k = 0;
    for (std::size_t i = 0; i + 1 < std::size_t{T} * B; i += 3, ++k) s.truncated[i] = 1;
    s.truncation_observations.assign(k * D, 0.25f);
  }
  if (rng() % 2) s.mask_episode(0, T - 1, static_cast<std::uint32_t>(rng() % B), InfraFailure::sandbox_start);
  if (rng() % 2) s.count_failure(InfraFailure::reward_timeout, 2);
  if (rng() % 2) s.work = SegmentWork{0.5, 0.125, 2.0, rng() % 10};
  s.reward_retries = static_cast<std::uint32_t>(rng() % 3);
  return s;
}

WireBuffer with_word_changed(const WireBuffer& buf, std::size_t word, std::uint64_t mask) {
  std::vector<std::uint64_t> words(buf.size() / 8);
  std::memcpy(words.data(), buf.bytes().data(), buf.size());
  words[word] ^= mask;
  return WireBuffer::copy_of(words.data(), buf.size());
}

}  // namespace

TEST_CASE("a segment without token rows is written in the fixed layout and Cap'n Proto's reader reads it the same",
          "[messages][codec][fixed_layout]") {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 60; ++i) {
    const auto T = static_cast<std::uint32_t>(1 + rng() % 9), B = static_cast<std::uint32_t>(1 + rng() % 5),
               D = static_cast<std::uint32_t>(1 + rng() % 5);
    const Segment s = random_segment(rng, T, B, D);
    const auto buf = encode(s, "explorer/" + std::string(i, 'x'));  // senders of every length
    REQUIRE(codec_detail::read_fixed_layout(buf, {}).has_value());
    auto fixed = decode<Segment>(buf);
    auto general = codec_detail::decode_segment_general(buf);
    REQUIRE(fixed.ok());
    REQUIRE(general.ok());
    Segment expected = s;
    if (!expected.infra_failures.empty()) expected.infra_failures.resize(kInfraFailureCodes);
    CHECK(same_segment(*fixed, expected));
    CHECK(same_segment(*general, expected));
    CHECK(fixed->observations.is_view());
    CHECK(fixed->observations.keeper() == buf.keepalive());
    // The same segment laid out by Cap'n Proto's builder is not in the layout, and reads the same.
    const auto built = codec_detail::encode_segment_built(s, "explorer/1");
    CHECK_FALSE(codec_detail::read_fixed_layout(built, {}).has_value());
    auto from_built = decode<Segment>(built);
    REQUIRE(from_built.ok());
    CHECK(same_segment(*from_built, expected));
  }
}

TEST_CASE("a fixed-layout segment with any word changed is read as Cap'n Proto reads it, or refused as it refuses it",
          "[messages][codec][fixed_layout][defensive]") {
  std::mt19937_64 rng(5);
  Segment s = random_segment(rng, 3, 2, 2);
  s.mask_episode(0, 2, 1, InfraFailure::sandbox_start);
  s.truncated[0] = 1;
  s.truncation_observations.assign(std::size_t{s.truncations()} * 2, 0.25f);
  s.work = SegmentWork{0.5, 0.125, 2.0, 3};
  const auto buf = encode(s, "explorer/1");
  REQUIRE(codec_detail::read_fixed_layout(buf, {}).has_value());
  int read_in_layout = 0, read_general = 0, refused = 0, disagreements = 0;
  for (std::size_t word = 0; word < buf.size() / 8; ++word)
    for (int bit = 0; bit < 64; ++bit) {
      // One bit, and a run of bits from it (a pointer's offset and sizes change together).
      for (std::uint64_t mask : {std::uint64_t{1} << bit, ~std::uint64_t{0} << bit}) {
        const auto changed = with_word_changed(buf, word, mask);
        const bool in_layout = codec_detail::read_fixed_layout(changed, {}).has_value();
        auto got = decode<Segment>(changed);
        auto want = codec_detail::decode_segment_general(changed);
        const bool agree = got.ok() == want.ok() &&
                           (got.ok() ? same_segment(*got, *want)
                                     : got.error().code == want.error().code &&
                                           got.error().message == want.error().message);
        disagreements += !agree;
        if (!agree) UNSCOPED_INFO("word " << word << " mask " << mask);
        if (!got.ok()) ++refused;
        else if (in_layout) ++read_in_layout;
        else ++read_general;
      }
    }
  CHECK(disagreements == 0);
  // Both ways were taken: changed values stay in the layout, changed pointers leave it.
  CHECK(read_in_layout > 100);
  CHECK(read_general > 0);
  CHECK(refused > 100);
}

TEST_CASE("a fixed-layout segment's values are checked as the general reader checks them",
          "[messages][codec][fixed_layout][defensive]") {
  const std::vector<std::pair<std::string, std::function<void(Segment&)>>> faults = {
      {"observations: must be finite", [](Segment& s) { s.observations[5] = std::nanf(""); }},
      {"behaviourLogProbs: must be finite and <= 0", [](Segment& s) { s.behaviour_log_probs[3] = 0.5f; }},
      {"rewards: must be finite", [](Segment& s) { s.rewards[0] = INFINITY; }},
      {"masked: entries must be 0 or 1",
       [](Segment& s) {
         s.mask_episode(0, 1, 0, InfraFailure::env_failed);
         s.masked[1] = 2;
       }},
      {"maskedRows: not an InfraFailure code",
       [](Segment& s) {
         s.mask_episode(0, 1, 0, InfraFailure::env_failed);
         s.masked_rows[0] = 0;
       }},
      {"maskedRows without masked steps", [](Segment& s) { s.masked_rows = {1}; }},
      {"infraFailures: more counts than InfraFailure codes",
       [](Segment& s) { s.infra_failures.assign(kInfraFailureCodes + 1, 1); }},
      {"work: seconds must be finite and not negative", [](Segment& s) { s.work.score_s = -1.0; }},
      {"truncationObservations: must be finite",
       [](Segment& s) {
         s.truncated[2] = 1;
         s.truncation_observations.assign(4, std::nanf(""));
       }},
  };
  for (const auto& [message, fault] : faults) {
    Segment s = test::make_segment(4, 2, 3);
    fault(s);
    const auto buf = encode(s, "x");
    INFO(message);
    REQUIRE(codec_detail::read_fixed_layout(buf, {}).has_value());  // recognised: its own checks refuse it
    auto r = decode<Segment>(buf);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::invalid_field);
    CHECK(r.error().message == message);
    CHECK(codec_detail::decode_segment_general(buf).error().message == message);
  }
}
