#include <cmath>
#include <random>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <catch2/catch.hpp>

#include "messages/caf_wire.hpp"
#include "messages/codec.hpp"
#include "messages/envelope.capnp.h"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("a segment survives encode and decode unchanged", "[messages][codec]") {
  Segment s = test::make_segment(8, 3, 5, 2);
  s.policy_versions[3] = 6;
  s.sequence = 17;
  s.sent_index = 12;
  s.sent_base = 9;
  s.work = SegmentWork{1.5, 0.25, 2.0, 7};
  auto back = decode<Segment>(encode(s, "explorer/2"));
  REQUIRE(back.ok());
  CHECK(back->work.decode_s == 1.5);
  CHECK(back->work.tool_s == 0.25);
  CHECK(back->work.score_s == 2.0);
  CHECK(back->work.tool_calls == 7);
  CHECK(back->explorer_id == 2);
  CHECK(back->sequence == 17);
  CHECK(back->sent_index == 12);
  CHECK(back->sent_base == 9);
  CHECK(back->observations == s.observations);
  CHECK(back->actions == s.actions);
  CHECK(back->behaviour_log_probs == s.behaviour_log_probs);
  CHECK(back->terminated == s.terminated);
  CHECK(back->policy_versions == s.policy_versions);
  CHECK(back->bootstrap_observations == s.bootstrap_observations);
  CHECK(back->episode_returns == s.episode_returns);
  CHECK(back->oldest_version() == 5);
}

TEST_CASE("every message kind round-trips through its Envelope", "[messages][codec]") {
  MetricsData m;
  m.env_steps = 99;
  m.mean_return = 12.5f;
  m.lag_histogram = {1, 2, 3};
  m.expert_utilisation = {0.25f, 0.75f};
  m.arrivals_by_explorer = {{3, 40, 1}, {5, 7, 0}};
  auto mb = decode<MetricsData>(encode(m, "learner"));
  REQUIRE(mb.ok());
  CHECK(mb->env_steps == 99);
  CHECK(mb->lag_histogram == m.lag_histogram);
  CHECK(mb->expert_utilisation == m.expert_utilisation);
  REQUIRE(mb->arrivals_by_explorer.size() == 2);
  CHECK(mb->arrivals_by_explorer[0].explorer == 3);
  CHECK(mb->arrivals_by_explorer[0].accounted == 40);
  CHECK(mb->arrivals_by_explorer[0].vanished == 1);

  EnvStepResultData r{4, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 0}, {0, 1}, {0, 0}, 7, {0, 1}, {}, {}};
  auto rb = decode<EnvStepResultData>(encode(r, "env"));
  REQUIRE(rb.ok());
  CHECK(rb->observations == r.observations);
  CHECK(rb->terminated == r.terminated);
  CHECK(rb->lost == r.lost);
  CHECK(rb->reward_payloads.empty());
  // Deferred-reward payloads cross with the step (an env actor to its explorer), one per env or none.
  r.reward_payloads = {"", "2+3\n5"};
  rb = decode<EnvStepResultData>(encode(r, "env"));
  REQUIRE(rb.ok());
  CHECK(rb->reward_payloads == r.reward_payloads);
  r.reward_payloads = {"2+3\n5"};
  auto short_list = decode<EnvStepResultData>(encode(r, "env"));
  REQUIRE_FALSE(short_list.ok());
  CHECK(short_list.error().code == Errc::invalid_field);

  WeightSetData w;
  w.version = 3;
  w.tensors.push_back({"a", {2, 2}, {1, 2, 3, 4}});
  w.checksum = w.compute_checksum();
  auto wb = decode<WeightSetData>(encode(w, "learner"));
  REQUIRE(wb.ok());
  CHECK(wb->tensors[0].values == w.tensors[0].values);

  CHECK(decode<JoinData>(encode(JoinData{Role::explorer, "head", 3, "tok"}, "x"))->auth_token == "tok");
  JoinData rejoin{Role::explorer, "rollout-a", 7, ""};
  rejoin.first_env_id = 112;
  rejoin.num_envs = 16;
  rejoin.rejoined = true;
  rejoin.produced = 41;
  rejoin.kept = 1;
  auto rj = decode<JoinData>(encode(rejoin, "x"));
  REQUIRE(rj.ok());
  CHECK(rj->first_env_id == 112);
  CHECK(rj->num_envs == 16);
  CHECK(rj->rejoined);
  CHECK(rj->produced == 41);
  CHECK(rj->kept == 1);
  CHECK(decode<LeaveData>(encode(LeaveData{Role::reward, 1, "bye", 0}, "x"))->reason == "bye");
  CHECK(decode<LeaveData>(encode(LeaveData{Role::explorer, 1, "drained", 31}, "x"))->sent == 31);
  CHECK(decode<HeartbeatData>(encode(HeartbeatData{Role::env, 2, 5}, "x"))->sent_unix_ns == 5);
  CHECK(decode<ScaleCommandData>(encode(ScaleCommandData{4, -1, ""}, "x"))->explorers == 4);
  CHECK(decode<RewardRequestData>(encode(RewardRequestData{1, 2, "1+1", "2"}, "x"))->payload == "2");
  CHECK(decode<RewardResultData>(encode(RewardResultData{1, 1.0f, true, "ok", ""}, "x"))->score == 1.0f);
  CHECK(decode<RewardResultData>(encode(RewardResultData{1, 1.0f, true, "ok", "", InfraFailure::none, 0.5}, "x"))
            ->seconds == 0.5);
  CHECK(decode<EnvStepData>(encode(EnvStepData{{0, 1, 1}, 4}, "x"))->actions.size() == 3);
  CHECK(decode<EnvResetData>(encode(EnvResetData{9, 16}, "x"))->num_envs == 16);
  CHECK(decode<WeightsAvailableData>(encode(WeightsAvailableData{7, 100, 1}, "x"))->version == 7);
  CHECK(decode<WeightRequestData>(encode(WeightRequestData{7, false}, "x"))->version == 7);
}

TEST_CASE("decoding truncated bytes gives truncated_message", "[messages][codec][defensive]") {
  auto full = encode(test::make_segment(4, 2, 0), "x");
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{8}, full.size() / 2, full.size() - 8}) {
    auto part = WireBuffer::copy_of(full.bytes().data(), cut);
    auto r = decode<Segment>(part);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::truncated_message);
  }
}

TEST_CASE("decoding random bytes gives a named error, never a crash", "[messages][codec][defensive]") {
  std::mt19937_64 rng(42);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> bytes(8 * (1 + rng() % 64));
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    if (i % 3 == 0) {  // a plausible segment table, random content
      bytes[0] = bytes[1] = bytes[2] = bytes[3] = 0;
      std::uint32_t words = static_cast<std::uint32_t>(bytes.size() / 8 - 1);
      std::memcpy(bytes.data() + 4, &words, 4);
    }
    auto r = decode<Segment>(WireBuffer::copy_of(bytes.data(), bytes.size()));
    if (!r.ok()) {
      ++errors;
      CHECK(r.error().code != Errc::ok);
      CHECK(std::string(to_string(r.error().code)) != "unknown");
    }
  }
  CHECK(errors == 2000);
}

TEST_CASE("flipped bytes inside a valid segment are caught", "[messages][codec][defensive]") {
  auto full = encode(test::make_segment(4, 2, 0), "x");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::vector<std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(full.bytes().data()),
                                    reinterpret_cast<const std::uint8_t*>(full.bytes().data()) + full.size());
    bytes[rng() % bytes.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    auto r = decode<Segment>(WireBuffer::copy_of(bytes.data(), bytes.size()));
    if (!r.ok()) CHECK(r.error().code != Errc::ok);  // some flips hit values and stay valid
  }
}

TEST_CASE("a valid message of the wrong type gives wrong_message_type", "[messages][codec][defensive]") {
  auto buf = encode(EnvResetData{1, 4}, "env");
  auto r = decode<Segment>(buf);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::wrong_message_type);
  CHECK(r.error().message.find("env_reset") != std::string::npos);
}

TEST_CASE("an over-large message gives message_too_large", "[messages][codec][defensive]") {
  auto buf = encode(test::make_segment(64, 16, 0), "x");
  DecodeOptions small;
  small.max_bytes = 1024;
  CHECK(decode<Segment>(buf, small).error().code == Errc::message_too_large);
  DecodeOptions budget;
  budget.traversal_limit_words = 16;  // a read budget far below the message's size
  CHECK(decode<Segment>(buf, budget).error().code == Errc::message_too_large);
}

TEST_CASE("an over-deep message gives message_too_deep", "[messages][codec][defensive]") {
  // An Envelope whose `sender` pointer leads to a chain of 100 nested structs.
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<wire::Envelope>();
  root.setSchemaVersion(1);
  auto any = capnp::toAny(root);  // AnyStruct::Builder over the root
  auto ptr = any.getPointerSection()[0];
  for (int depth = 0; depth < 100; ++depth) {
    auto s = ptr.initAsAnyStruct(0, 1);
    ptr = s.getPointerSection()[0];
  }
  WireBuffer buf(capnp::messageToFlatArray(mb));
  auto r = decode<Segment>(buf);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::message_too_deep);
}

TEST_CASE("a newer schema version is refused as unsupported_schema", "[messages][codec][defensive]") {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<wire::Envelope>();
  root.setSchemaVersion(999);
  root.initBody().initEnvReset().setNumEnvs(1);
  CHECK(decode<EnvResetData>(WireBuffer(capnp::messageToFlatArray(mb))).error().code == Errc::unsupported_schema);
}

TEST_CASE("a segment whose shapes disagree gives invalid_field", "[messages][codec][defensive]") {
  Segment s = test::make_segment(4, 2, 0);
  s.actions.pop_back();
  s.actions.pop_back();
  auto r = decode<Segment>(encode(s, "x"));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::invalid_field);
  Segment t = test::make_segment(4, 2, 0);
  t.behaviour_log_probs[0] = 0.5f;  // a probability above 1
  CHECK(decode<Segment>(encode(t, "x")).error().code == Errc::invalid_field);
  Segment u = test::make_segment(4, 2, 0);
  u.work.tool_s = -1.0;  // time spent cannot be negative
  CHECK(decode<Segment>(encode(u, "x")).error().code == Errc::invalid_field);
  u.work.tool_s = std::nan("");
  CHECK(decode<Segment>(encode(u, "x")).error().code == Errc::invalid_field);
  CHECK(decode<RewardResultData>(encode(RewardResultData{1, 1.0f, true, "ok", "", InfraFailure::none, -2.0}, "x"))
            .error()
            .code == Errc::invalid_field);
}

TEST_CASE("copies of a WireMsg share one buffer", "[messages][caf]") {
  WireMsg a{encode(test::make_segment(4, 2, 0), "x")};
  WireMsg b = a;
  CHECK(b.buf.shares_storage_with(a.buf));
}

TEST_CASE("a WireMsg survives CAF's binary serialisation", "[messages][caf]") {
  caf::actor_system_config cfg;
  register_wire_types(cfg);
  caf::actor_system sys{cfg};
  WireMsg a{encode(test::make_segment(4, 2, 9), "x")};
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  REQUIRE_FALSE(sink(a));
  WireMsg b;
  caf::binary_deserializer source{sys, bytes};
  REQUIRE_FALSE(source(b));
  CHECK_FALSE(b.buf.shares_storage_with(a.buf));
  auto seg = decode<Segment>(b.buf);
  REQUIRE(seg.ok());
  CHECK(seg->oldest_version() == 9);
}
