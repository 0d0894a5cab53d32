// safetensors (core/safetensors.hpp): what we write reads back bit for bit
// through a memory map; a file laid out by hand (not by our writer) reads
// as the format says; BF16 and F16 convert exactly; every way a header can
// lie is refused naming the tensor; a sharded checkpoint's index and its
// shards must agree.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/safetensors.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

// A file's bytes: the header length, the header, the data.
std::string st_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

Result<SafetensorsFile> parse_bytes(const std::string& bytes) {
  return SafetensorsFile::parse(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "t.safetensors");
}

std::string refusal(const std::string& header, const std::string& data) {
  auto f = parse_bytes(st_bytes(header, data));
  REQUIRE_FALSE(f.ok());
  return f.error().message;
}

}  // namespace

TEST_CASE("tensors written as safetensors map back bit for bit, with their dtypes, shapes and metadata",
          "[safetensors][core]") {
  const test::TempDir t("rlx-safetensors");
  const std::vector<float> w = {1.5f, -2.0f, 0.0f, 3.25f, 1e-20f, -0.0f};
  const std::vector<std::uint16_t> bf = {f32_to_bf16(1.0f), f32_to_bf16(-3.5f)};
  const std::vector<std::int64_t> ids = {7, -1, 1LL << 40};
  const auto path = (t.path / "model.safetensors").string();
  REQUIRE(write_safetensors(path,
                            {{"layer.weight", StDtype::f32, {2, 3}, w.data(), w.size() * 4},
                             {"layer.bf", StDtype::bf16, {2}, bf.data(), 4},
                             {"ids", StDtype::i64, {3}, ids.data(), 24},
                             {"empty", StDtype::f32, {0, 4}, nullptr, 0}},
                            {{"format", "pt"}})
              .ok());
  std::ifstream raw(path, std::ios::binary);
  std::uint64_t n = 0;
  raw.read(reinterpret_cast<char*>(&n), 8);
  CHECK(n % 8 == 0);  // padded as the reference writer pads
  auto f = SafetensorsFile::open(path);
  INFO((f ? std::string() : f.error().message));
  REQUIRE(f.ok());
  CHECK(f->metadata().at("format") == "pt");
  REQUIRE(f->tensors().size() == 4);
  const auto* lw = f->find("layer.weight");
  REQUIRE(lw);
  CHECK(lw->shape == std::vector<std::int64_t>{2, 3});
  CHECK(std::memcmp(lw->data, w.data(), 24) == 0);
  CHECK(*st_to_f32(*lw) == w);
  CHECK(*st_to_f32(*f->find("layer.bf")) == std::vector<float>{1.0f, -3.5f});
  CHECK(std::memcmp(f->find("ids")->data, ids.data(), 24) == 0);
  CHECK_FALSE(st_to_f32(*f->find("ids")).ok());  // not a float
  CHECK(f->find("empty")->numel() == 0);
  CHECK(f->find("missing") == nullptr);
  // The writer refuses what the format cannot hold.
  CHECK_FALSE(write_safetensors(path, {{"a", StDtype::f32, {3}, w.data(), 8}}).ok());
  CHECK_FALSE(write_safetensors(path, {{"a", StDtype::f32, {1}, w.data(), 4}, {"a", StDtype::f32, {1}, w.data(), 4}}).ok());
  // A tensor made as it is written: its bytes land where the header says;
  // a writer that gives fewer bytes than the tensor's, or fails, is an
  // error naming the tensor, and the file already there stays whole.
  const auto streamed = (t.path / "streamed.safetensors").string();
  const auto first = [&](std::streamsize bytes) {
    return [&w, bytes](std::ostream& out) {
      return static_cast<bool>(out.write(reinterpret_cast<const char*>(w.data()), bytes));
    };
  };
  REQUIRE(write_safetensors(streamed, {{"s", StDtype::f32, {3}, nullptr, 12, first(12)},
                                       {"t", StDtype::f32, {1}, w.data(), 4}})
              .ok());
  auto back = SafetensorsFile::open(streamed);
  REQUIRE(back.ok());
  CHECK(*st_to_f32(*back->find("s")) == std::vector<float>(w.begin(), w.begin() + 3));
  CHECK(*st_to_f32(*back->find("t")) == std::vector<float>{w[0]});
  auto bad = write_safetensors(streamed, {{"s", StDtype::f32, {3}, nullptr, 12, first(8)}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("tensor s"));
  const auto fails = [](std::ostream&) { return false; };
  CHECK_FALSE(write_safetensors(streamed, {{"s", StDtype::f32, {3}, nullptr, 12, fails}}).ok());
  CHECK(SafetensorsFile::open(streamed).ok());
  CHECK_FALSE(std::filesystem::exists(streamed + ".tmp"));
}

TEST_CASE("a safetensors file laid out by hand reads as the format says, and BF16 and F16 convert exactly",
          "[safetensors][core]") {
  // Two F16 values then one BF16, ranges given out of order in the header.
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  const std::string data = std::string("\x00\x3c\x00\xc0", 4) + std::string("\xc0\x3f", 2);  // 1.0, -2.0; 1.5
  const std::string bytes = st_bytes(header, data);  // the parsed file views these: they outlive it
  auto f = parse_bytes(bytes);
  INFO((f ? std::string() : f.error().message));
  REQUIRE(f.ok());
  CHECK(f->tensors().front().name == "a");  // in the data's order
  CHECK(*st_to_f32(*f->find("a")) == std::vector<float>{1.0f, -2.0f});
  CHECK(*st_to_f32(*f->find("b")) == std::vector<float>{1.5f});
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(std::isinf(f16_to_f32(0x7C00)));
  CHECK(std::isnan(f16_to_f32(0x7E00)));
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);  // a tie rounds to even
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST_CASE("a safetensors header that lies is refused naming the tensor and what is wrong", "[safetensors][core]") {
  CHECK_THAT(parse_bytes("abc").error().message, Catch::Contains("shorter than the 8-byte"));
  std::string past(8, '\0');
  past[0] = 100;
  CHECK_THAT(parse_bytes(past + "{}").error().message, Catch::Contains("in a file of"));
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32 bytes of header
  CHECK_THAT(parse_bytes(huge).error().message, Catch::Contains("100 MB"));
  CHECK_THAT(refusal("not json", ""), Catch::Contains("not a JSON object"));
  CHECK_THAT(refusal("[1]", ""), Catch::Contains("not a JSON object"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", "a"),
             Catch::Contains("tensor x: dtype F8_E4M3"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
             Catch::Contains("tensor x: a dimension"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
             Catch::Contains("needs 8 bytes"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", "abcd"),
             Catch::Contains("past the 4 bytes"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,1]}})", "a"),
             Catch::Contains("overflows"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"y":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                     "abc"),
             Catch::Contains("overlaps"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "ab"), Catch::Contains("bytes 0..1 belong to no tensor"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "ab"), Catch::Contains("bytes 1..2 belong to no tensor"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}})", "a"), Catch::Contains("begin <= end"));
  CHECK_THAT(refusal(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "a"), Catch::Contains("[begin, end]"));
  CHECK_THAT(refusal(R"({"__metadata__":{"a":1}})", ""), Catch::Contains("__metadata__.a"));
  CHECK_THAT(refusal(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "a"), Catch::Contains("empty name"));
}

TEST_CASE("a sharded safetensors checkpoint opens when its index and its shards agree, and is refused when they do not",
          "[safetensors][core]") {
  const test::TempDir t("rlx-safetensors-shards");
  const float one = 1.0f, two = 2.0f;
  REQUIRE(write_safetensors((t.path / "model-00001-of-00002.safetensors").string(), {{"a", StDtype::f32, {1}, &one, 4}}).ok());
  REQUIRE(write_safetensors((t.path / "model-00002-of-00002.safetensors").string(), {{"b", StDtype::f32, {1}, &two, 4}}).ok());
  const auto index = [&](const std::string& map) {
    std::ofstream(t.path / "model.safetensors.index.json") << R"({"metadata":{"total_size":8},"weight_map":)" << map << "}";
  };
  index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"})");
  auto c = SafetensorsCheckpoint::open(t.path.string());
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->names() == std::vector<std::string>{"a", "b"});
  CHECK(*st_to_f32(*c->find("b")) == std::vector<float>{2.0f});
  index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors"})");
  CHECK_THAT(SafetensorsCheckpoint::open(t.path.string()).error().message, Catch::Contains("tensor c, which the index names"));
  REQUIRE(write_safetensors((t.path / "extra.safetensors").string(),
                            {{"x", StDtype::f32, {1}, &one, 4}, {"y", StDtype::f32, {1}, &two, 4}})
              .ok());
  index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","x":"extra.safetensors"})");
  CHECK_THAT(SafetensorsCheckpoint::open(t.path.string()).error().message, Catch::Contains("tensor y is not in the index"));
  index(R"({"a":"model-00001-of-00002.safetensors","b":"../model-00002-of-00002.safetensors"})");
  CHECK_THAT(SafetensorsCheckpoint::open(t.path.string()).error().message, Catch::Contains("not a file of this folder"));
  index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors"})");
  CHECK_FALSE(SafetensorsCheckpoint::open(t.path.string()).ok());
  index("[]");
  CHECK_THAT(SafetensorsCheckpoint::open(t.path.string()).error().message, Catch::Contains("weight_map"));
  fs::remove(t.path / "model.safetensors.index.json");
  CHECK_THAT(SafetensorsCheckpoint::open(t.path.string()).error().message, Catch::Contains("no model.safetensors"));
  fs::rename(t.path / "model-00001-of-00002.safetensors", t.path / "model.safetensors");
  CHECK(SafetensorsCheckpoint::open(t.path.string()).ok());  // one file, no index
}
