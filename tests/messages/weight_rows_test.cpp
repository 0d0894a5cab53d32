// A tensor larger than one Data blob of a weight set holds travels as
// consecutive entries of whole rows (NamedTensor.continues) and decodes
// whole, with the checksum of the whole; entries that do not continue a
// tensor's rows are refused. The blob's bound is made small here (the
// code path of a 622 MB embedding, without 622 MB).
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "messages/codec.hpp"
#include "messages/envelope.capnp.h"

using namespace rlx;

namespace weight_rows {

// Tensor i's value k is i * 64 + k (exact in bf16 too: integers to 256).
float value(std::size_t i, std::uint64_t k) { return static_cast<float>(i * 64 + k); }

void fill_values(const WeightSetLayout& layout, std::size_t i, void* into, std::uint64_t first, std::uint64_t n) {
  for (std::uint64_t k = 0; k < n; ++k) {
    const float v = value(i, first + k);
    if (layout.dtype == WeightDType::f32) {
      static_cast<float*>(into)[k] = v;
    } else {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      static_cast<std::uint16_t*>(into)[k] = static_cast<std::uint16_t>(bits >> 16);
    }
  }
}

float decoded(const NamedTensor& t, std::size_t k) {
  if (t.dtype == WeightDType::f32) return t.values[k];
  const std::uint32_t bits = std::uint32_t{t.bf16[k]} << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

struct Entry {
  std::string name;
  std::vector<std::uint32_t> shape;
  bool continues = false;
};

// A weight set of these entries (fp32 values, zero), written by hand.
WireBuffer crafted(const std::vector<Entry>& entries) {
  capnp::MallocMessageBuilder mb;
  auto root = mb.initRoot<wire::Envelope>();
  root.setSchemaVersion(1);
  auto w = root.initBody().initWeightSet();
  w.setVersion(1);
  w.setPolicyKind("moe_transformer");
  auto ts = w.initTensors(static_cast<unsigned>(entries.size()));
  for (unsigned i = 0; i < entries.size(); ++i) {
    ts[i].setName(entries[i].name.c_str());
    ts[i].setContinues(entries[i].continues);
    auto t = ts[i].initTensor();
    t.setDtype(wire::DType::FLOAT32);
    auto s = t.initShape(static_cast<unsigned>(entries[i].shape.size()));
    std::size_t n = 1;
    for (unsigned k = 0; k < entries[i].shape.size(); ++k) {
      s.set(k, entries[i].shape[k]);
      n *= entries[i].shape[k];
    }
    t.initData(static_cast<unsigned>(n * 4));
  }
  return WireBuffer(capnp::messageToFlatArray(mb));
}

}  // namespace weight_rows

TEST_CASE("a tensor over a blob's bytes travels in rows and decodes whole, with the checksum of the whole",
          "[messages][weights]") {
  for (const auto dtype : {WeightDType::f32, WeightDType::bf16}) {
    DYNAMIC_SECTION((dtype == WeightDType::f32 ? "fp32" : "bf16")) {
      WeightSetLayout layout;
      layout.version = 7;
      layout.policy_kind = "moe_transformer";
      layout.dtype = dtype;
      // Blobs of at most 100 bytes: "big" (10 x 6) in 4, 4 and 2 rows in fp32, 8 and 2 in bf16; "flat"
      // (70 values, a row each) in 25, 25 and 20 in fp32, 50 and 20 in bf16; the others whole.
      layout.tensors = {{"a", {3}}, {"big", {10, 6}}, {"flat", {70}}, {"c", {2, 2}}};
      std::vector<std::pair<std::size_t, std::uint64_t>> asked;  // (tensor, first) of each fill
      const auto fill = [&](std::size_t i, void* into, std::uint64_t first, std::uint64_t n) {
        asked.emplace_back(i, first);
        weight_rows::fill_values(layout, i, into, first, n);
      };
      const auto split = encode_weight_set(layout, fill, "learner", 100);
      if (dtype == WeightDType::f32)
        CHECK(asked == std::vector<std::pair<std::size_t, std::uint64_t>>{
                           {0, 0}, {1, 0}, {1, 24}, {1, 48}, {2, 0}, {2, 25}, {2, 50}, {3, 0}});
      else
        CHECK(asked ==
              std::vector<std::pair<std::size_t, std::uint64_t>>{{0, 0}, {1, 0}, {1, 48}, {2, 0}, {2, 50}, {3, 0}});
      asked.clear();
      const auto whole = encode_weight_set(layout, fill, "learner");
      CHECK(asked.size() == 4);  // every tensor in one entry
      CHECK(split.checksum == whole.checksum);
      CHECK(split.parameters == 3 + 60 + 70 + 4);
      // As another node gets them: copies, hashed in full.
      auto from_split = decode<WeightSetData>(WireBuffer::copy_of(split.buf.bytes().data(), split.buf.size()));
      auto from_whole = decode<WeightSetData>(WireBuffer::copy_of(whole.buf.bytes().data(), whole.buf.size()));
      REQUIRE(from_split.ok());
      REQUIRE(from_whole.ok());
      REQUIRE(from_split->tensors.size() == 4);
      CHECK(from_split->checksum == from_whole->checksum);
      for (std::size_t i = 0; i < 4; ++i) {
        const auto& t = from_split->tensors[i];
        INFO(t.name);
        CHECK(t.name == layout.tensors[i].first);
        CHECK(t.shape == layout.tensors[i].second);
        CHECK(t.dtype == dtype);
        REQUIRE(t.numel() == from_whole->tensors[i].numel());
        for (std::size_t k = 0; k < t.numel(); ++k) CHECK(weight_rows::decoded(t, k) == weight_rows::value(i, k));
      }
      auto info = check_weight_set(split.buf, {});
      REQUIRE(info.ok());
      CHECK(info->parameters == split.parameters);
    }
  }
}

TEST_CASE("entries that do not continue a tensor's rows are refused, naming it", "[messages][weights][defensive]") {
  using weight_rows::crafted;
  const auto refused = [](const WireBuffer& buf, const std::string& why) {
    auto r = decode<WeightSetData>(buf);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::invalid_field);
    CHECK_THAT(r.error().message, Catch::Contains(why));
  };
  refused(crafted({{"big", {2, 3}, true}, {"other", {2, 3}}}), "tensor big continues into other");
  refused(crafted({{"big", {2, 3}, true}, {"big", {2, 4}}}), "tensor big continues into big");
  refused(crafted({{"big", {2, 3}, true}, {"big", {2}}}), "not more rows of it");
  refused(crafted({{"a", {2}}, {"big", {2, 3}, true}}), "tensor big continues past the set's last entry");
  refused(crafted({{"s", {}, true}, {"s", {}}}), "a scalar has no rows");
  // Rows that do continue are taken (the checksum, left 0 here, is what fails).
  auto r = decode<WeightSetData>(crafted({{"big", {2, 3}, true}, {"big", {1, 3}}}));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("checksum mismatch"));
}
