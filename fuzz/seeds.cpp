// Writes one valid input per fuzz target into <dir>/<target>/, so the
// fuzzers start from real messages and mutate from there.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/log_codec.hpp"
#include "messages/extenv.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

namespace fs = std::filesystem;
using namespace rlx;

namespace {

void put(const fs::path& dir, const std::string& target, const void* data, std::size_t size,
         const std::string& name = "seed") {
  fs::create_directories(dir / target);
  std::ofstream out(dir / target / name, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void put(const fs::path& dir, const std::string& target, const WireBuffer& b, const std::string& name = "seed") {
  put(dir, target, b.bytes().data(), b.size(), name);
}

Segment segment() {
  Segment s;
  s.num_steps = 2;
  s.num_envs = 2;
  s.obs_dim = 4;
  s.observations.assign(16, 0.1f);
  s.actions = {0, 1, 1, 0};
  s.behaviour_log_probs.assign(4, -0.7f);
  s.rewards.assign(4, 1.0f);
  s.terminated = {0, 0, 0, 1};
  s.truncated.assign(4, 0);
  s.policy_versions = {3, 4};
  s.bootstrap_observations.assign(8, 0.0f);
  s.episode_returns = {2.0f};
  s.episode_lengths = {2};
  s.mask_episode(0, 1, 1, InfraFailure::overloaded);
  s.count_failure(InfraFailure::reward_timeout);
  s.reward_retries = 1;
  s.work = SegmentWork{0.5, 0.25, 0.125, 3};
  return s;
}

// A multi-turn token segment: 2 rows, prompt width 2, completions of 3
// and 2 tokens, row 0's middle token an observation.
Segment token_segment() {
  Segment s;
  s.num_steps = 5;
  s.num_envs = 2;
  s.obs_dim = 0;
  s.actions = {4, 0, 5, 6, 7, 8, 9, 10, 11, 0};
  s.behaviour_log_probs = {0, 0, 0, 0, -0.5f, -0.6f, 0, -0.7f, -0.4f, 0};
  s.rewards = {0, 0, 0, 0, 0, 1.0f, 0, 0, 1.0f, 0};
  s.terminated = {0, 0, 0, 0, 0, 1, 0, 0, 1, 0};
  s.truncated.assign(10, 0);
  s.policy_versions = {3, 3, 3, 4, 4};
  s.episode_returns = {0.0f, 1.0f};
  s.episode_lengths = {3, 2};
  TokenRows t;
  t.prompt_width = 2;
  t.prompt_lengths = {2, 1};
  t.route_width = 2;
  t.routes.assign(20, 1);
  t.group_size = 2;
  t.task_ids = {"train:1:1", "train:1:1"};
  t.observed.assign(10, 0);
  t.observed[3 * 2 + 0] = 1;
  s.tokens = t;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rlx_fuzz_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  put(dir, "segment", encode(segment(), "seed"));
  put(dir, "segment", encode(token_segment(), "seed"), "tokens");
  WeightSetData w;
  w.version = 7;
  w.policy_kind = "moe_mlp";
  w.tensors.push_back(NamedTensor{"a", {2, 2}, {1, 2, 3, 4}});
  w.checksum = w.compute_checksum();
  put(dir, "weight_set", encode(w, "seed"));
  put(dir, "weights_available", encode(WeightsAvailableData{7, 100, 1}, "seed"));
  put(dir, "weight_request", encode(WeightRequestData{7, false, true, 2}, "seed"));
  put(dir, "weight_chunk", encode(*make_weight_chunk(encode(w, "seed"), 7, 1, 64), "seed"));
  {  // a delta in the fuzz target's geometry (version 7 of 1000 bytes in chunks of 256, against zeros as version 6)
    std::vector<std::uint8_t> set(1000, 0), zeros(1000, 0);
    for (std::size_t i = 0; i < set.size(); i += 4) set[i + 3] = 0x3c;  // float exponents
    const DeltaBase base{6, WireBuffer::copy_of(zeros.data(), zeros.size())};
    auto delta = encode_weight_chunk(WireBuffer::copy_of(set.data(), set.size()), 7, 1, 256, "seed", &base);
    put(dir, "weight_chunk", *delta, "delta");
  }
  put(dir, "weight_request", encode(WeightRequestData{7, false, true, 2, 6}, "seed"), "with_base");
  {  // the bulk channel: a login, a request and a chunk, back to back
    std::vector<std::byte> stream;
    for (const WireBuffer& f : {encode(JoinData{Role::weight_store, "rollout-a", 0, "proof"}, "seed"),
                                encode(WeightRequestData{7, false, true, 1}, "seed"),
                                encode(*make_weight_chunk(encode(w, "seed"), 7, 1, 64), "seed")})
      stream.insert(stream.end(), f.bytes().begin(), f.bytes().end());
    put(dir, "bulk_frames", WireBuffer::copy_of(stream.data(), stream.size()));
  }
  put(dir, "env_reset", encode(EnvResetData{1, 2}, "seed"));
  put(dir, "env_step", encode(EnvStepData{{0, 1}, 3}, "seed"));
  EnvStepResultData r;
  r.obs_dim = 2;
  r.observations = {0.1f, 0.2f, 0.3f, 0.4f};
  r.rewards = {1, 0};
  r.terminated = {0, 1};
  r.truncated = {0, 0};
  put(dir, "env_step_result", encode(r, "seed"));
  put(dir, "reward_request", encode(RewardRequestData{1, 2, "task", "payload"}, "seed"));
  put(dir, "reward_result", encode(RewardResultData{1, 0.5f, true, "", "# f(*[1]) == 2\n", InfraFailure::none, 0.75}, "seed"));
  put(dir, "join", encode(JoinData{Role::explorer, "node", 3, "token"}, "seed"));
  put(dir, "leave", encode(LeaveData{Role::explorer, 3, "drained", 7}, "seed"));
  put(dir, "heartbeat", encode(HeartbeatData{Role::explorer, 3, 99}, "seed"));
  MetricsData m;
  m.lag_histogram = {1, 2};
  m.expert_utilisation = {0.5f, 0.5f};
  m.arrivals_by_explorer = {{3, 8, 1}};
  put(dir, "metrics", encode(m, "seed"));
  put(dir, "scale", encode(ScaleCommandData{4, 1, "node"}, "seed"));
  put(dir, "peek_kind", encode(segment(), "seed"));
  const WireBuffer env = encode(segment(), "seed");
  put(dir, "log_entry", encode_log_rollout(5, RolloutRecordData{Verdict::trained, 4, 5, 0, ""}, env).buf);
  put(dir, "index_entry", encode_index_entry(IndexEntryData{5, 4096, 1000, 42, LogKind::rollout}));
  const std::string toml = "[run]\nseed = 3\nenv = \"cartpole\"\n[learner]\nranks = 2\n[[node]]\nname = \"head\"\n"
                           "actors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\nexplorers = 2\n";
  put(dir, "config", toml.data(), toml.size());
  const std::string line =
      R"({"result":{"observations":[0.1,0.2,0.3,0.4,0.5,0.6],"rewards":[1,0],"terminated":[false,true],)"
      R"("truncated":[false,false],"rewardPayloads":["2+1\n3",""]}})"
      "\n";
  put(dir, "ext_env_json", line.data(), line.size());
  {  // a spec and a result, each in stream framing, back to back
    std::vector<unsigned char> stream;
    for (int kind = 0; kind < 2; ++kind) {
      capnp::MallocMessageBuilder mb;
      auto root = mb.initRoot<wire::EnvResponse>();
      if (kind == 0) {
        auto sp = root.initSpec();
        sp.setName("seed");
        sp.setObsDim(3);
        sp.setNumActions(2);
      } else {
        auto res = root.initResult();
        auto o = res.initObservations(6);
        for (unsigned i = 0; i < 6; ++i) o.set(i, 0.1f * static_cast<float>(i));
        res.initRewards(2).set(0, 1.0f);
        res.initTerminated(2).set(1, true);
        res.initTruncated(2);
      }
      auto words = capnp::messageToFlatArray(mb);
      auto bytes = words.asBytes();
      stream.insert(stream.end(), bytes.begin(), bytes.end());
    }
    put(dir, "ext_env_capnp", stream.data(), stream.size());
  }
  {  // a workspace episode's changed files (a payload), then a policy's turn
    static const char bytes[] =
        "pkg/ledger.py\n42\ndef f(n):\n    \"\"\"Doc.\"\"\"\n    return n + 1\n\0@replace pkg/ledger.py f\n    return 2\n@end\n";
    const std::string text(bytes, sizeof bytes - 1);
    put(dir, "workspace_text", text.data(), text.size());
  }
  {  // a chat request with every field the gateway reads
    static const char body[] =
        R"({"model":"rlx","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text",)"
        R"("text":"t"}]}],"max_tokens":8,"temperature":0.5,"top_p":0.9,"stop":["\n"],"n":2,"seed":1,)"
        R"("stream":false,"rlx_session":"a","prompt":[1,2]})";
    put(dir, "gateway_request", body, sizeof body - 1);
  }
  {  // a byte-level BPE tokenizer.json (the Qwen shape: NFC, Split then ByteLevel), then text
    std::string json = R"({"model":{"type":"BPE","vocab":{)";
    int next = 256;
    for (int b = 0; b < 256; ++b) {  // GPT-2's byte characters, as JSON escapes
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char key[16];
      std::snprintf(key, sizeof key, "\\u%04x", printable ? b : next++);
      json += std::string(b ? "," : "") + "\"" + key + "\":" + std::to_string(b);
    }
    json += R"(,"\u0120t":256,"he":257},"merges":["\u0120 t","h e"]},"added_tokens":[{"id":258,"content":"<|im_end|>",)"
            R"("special":true}],"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"Sequence","pretokenizers":[)"
            R"({"type":"Split","pattern":{"Regex":"\\p{L}+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated"},)"
            R"({"type":"ByteLevel","use_regex":false}]},"decoder":{"type":"ByteLevel"}})";
    json += std::string(1, '\0') + "the hetten\u00e9 <|im_end|>  x";
    put(dir, "hf_tokenizer", json.data(), json.size());
  }
  {  // a safetensors file: an F16 pair and a BF16, the header padded to 8 bytes
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
        R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]}}   )";
    std::string file(8, '\0');
    file[0] = static_cast<char>(header.size());
    file += header + std::string("\x00\x3c\x00\xc0\xc0\x3f", 6);
    put(dir, "safetensors", file.data(), file.size());
  }
  return 0;
}
