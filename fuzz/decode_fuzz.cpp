// libFuzzer targets for every decoder of untrusted bytes: each Envelope
// message, peek_kind, the rollout log's entries and index entries, the
// TOML topology, and an external env's replies (JSON lines and Cap'n
// Proto framing), a workspace episode's changed files and tool calls, and
// the gateway's OpenAI-style request bodies, a Hugging Face tokenizer.json and a safetensors file.
// One source; CMake builds one target per FUZZ_KIND.
// A decoder may refuse input (that is its job); it must never crash,
// hang or read out of bounds (ASan/UBSan are on).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "core/config.hpp"
#include "messages/codec.hpp"
#include "messages/extenv_codec.hpp"
#include "messages/stream_frame.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/log_codec.hpp"
#if FUZZ_KIND == 22
#include "envs/workspace/agent_tools.hpp"
#endif
#if FUZZ_KIND == 23
#include "gateway/openai_request.hpp"
#endif
#if FUZZ_KIND == 24
#include "envs/tokens/hf_tokenizer.hpp"
#endif
#if FUZZ_KIND == 25
#include "core/safetensors.hpp"
#endif

#ifndef FUZZ_KIND
#error "FUZZ_KIND selects the decoder"
#endif

namespace {
// The input as a stream, read as a socket or a pipe would be.
rlx::ReadExact reader_of(const std::uint8_t* data, std::size_t size) {
  auto at = std::make_shared<std::size_t>(0);
  return [=](void* into, std::size_t n) -> rlx::Result<void> {
    if (n > size - *at) return rlx::make_error(rlx::Errc::io, "end of input");
    std::memcpy(into, data + *at, n);
    *at += n;
    return {};
  };
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx;
  const WireBuffer buf = WireBuffer::copy_of(data, size);
  DecodeOptions small;  // limits small enough that the fuzzer cannot OOM us
  small.max_bytes = 1 << 20;
  small.traversal_limit_words = 1 << 18;
  switch (FUZZ_KIND) {
    case 0: (void)decode<Segment>(buf, small); break;
    case 1:
      (void)decode<WeightSetData>(buf, small);
      (void)check_weight_set(buf, small);
      break;
    case 2: (void)decode<WeightsAvailableData>(buf, small); break;
    case 3: (void)decode<WeightRequestData>(buf, small); break;
    case 4: (void)decode<EnvResetData>(buf, small); break;
    case 5: (void)decode<EnvStepData>(buf, small); break;
    case 6: (void)decode<EnvStepResultData>(buf, small); break;
    case 7: (void)decode<RewardRequestData>(buf, small); break;
    case 8: (void)decode<RewardResultData>(buf, small); break;
    case 9: (void)decode<JoinData>(buf, small); break;
    case 10: (void)decode<LeaveData>(buf, small); break;
    case 11: (void)decode<HeartbeatData>(buf, small); break;
    case 12: (void)decode<MetricsData>(buf, small); break;
    case 13: (void)decode<ScaleCommandData>(buf, small); break;
    case 14: (void)peek_kind(buf, small); break;
    case 15: (void)decode_log_entry(buf, true, small); break;
    case 16: (void)decode_index_entry(buf, small); break;
    case 17:
      (void)parse_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml", {"cartpole"});
      break;
    case 18: {  // what a weight relay does with a chunk: decode it, or check and place it in one pass
      (void)decode<WeightChunkData>(buf, small);
      ChunkAssembler a(7, 1000, 256);
      static const std::vector<std::uint8_t> zeros(1000, 0);  // the base of the seeds' deltas
      a.set_base(DeltaBase{6, WireBuffer::copy_of(zeros.data(), zeros.size())});
      (void)a.add_encoded(buf);
      break;
    }
    case 19: {  // the bulk channel: frames as they come off the socket, then what each end decodes
      const ReadExact from_input = reader_of(data, size);
      kj::Array<capnp::word> reuse;
      ChunkAssembler a(7, 1000, 256);
      for (int i = 0; i < 64; ++i) {
        auto frame = read_stream_frame(from_input, 1 << 20, i % 2 ? &reuse : nullptr);
        if (!frame) break;
        (void)decode<JoinData>(*frame, small);
        (void)decode<LeaveData>(*frame, small);
        (void)decode<WeightRequestData>(*frame, small);
        (void)a.add_encoded(*frame);
      }
      break;
    }
    case 20: {  // an external env's JSON line, as a spec and as a result of 2 envs of 3 floats
      const std::span<const unsigned char> line(data, size);
      (void)parse_ext_env_spec(EnvProtocol::json, line);
      std::vector<std::string> hints;
      (void)parse_ext_env_result(EnvProtocol::json, line, 2, 3, &hints);
      break;
    }
    case 21: {  // an external env's Cap'n Proto replies: stream frames off its stdout, then each parsed
      const ReadExact from_input = reader_of(data, size);
      for (int i = 0; i < 16; ++i) {
        auto frame = read_stream_frame(from_input, 1 << 20);
        if (!frame) break;
        const auto bytes = frame->bytes();
        const std::span<const unsigned char> words(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
        (void)parse_ext_env_spec(EnvProtocol::capnp, words);
        (void)parse_ext_env_result(EnvProtocol::capnp, words, 2, 3);
      }
      break;
    }
#if FUZZ_KIND == 22
    case 22: {  // a workspace episode's bytes: the changed files a reward request carries (up to a NUL), then a policy's turn
      const std::string_view all(reinterpret_cast<const char*>(data), size);
      const auto nul = std::min(all.find('\0'), all.size());
      const auto changes = decode_changes(all.substr(0, nul));
      const std::string_view turn = all.substr(std::min(nul + 1, all.size()));
      for (const bool ended : {false, true}) {
        const ParsedTurn t = parse_turn(turn, ended);
        if (t.end > turn.size()) __builtin_trap();
        if (t.state == ParsedTurn::State::call) (void)bad_workspace_path(t.call.path);
        // A replace by name, on the first file the payload carries (or on the turn itself).
        if (t.state == ParsedTurn::State::call && !t.call.function.empty()) {
          const auto lines = split_lines(changes && !changes->empty() ? changes->front().text : std::string(turn));
          const BodyLines b = function_body(lines, t.call.function);
          const auto n = static_cast<int>(lines.size());
          if (b.why.empty() && (b.first < 1 || b.last < b.first - 1 || b.last > n || b.first > n + 1)) __builtin_trap();
        }
      }
      break;
    }
#endif
#if FUZZ_KIND == 23
    case 23: {  // a gateway request body, as /v1/completions and as /v1/chat/completions
      const std::string_view body(reinterpret_cast<const char*>(data), size);
      for (const bool chat : {false, true}) {
        auto r = parse_completion_request(body, chat);
        if (r && chat) (void)chat_prompt(r->messages);
        if (!r) (void)gateway_error_json(r.error().message, "invalid_request_error");
      }
      break;
    }
#endif
#if FUZZ_KIND == 24
    case 24: {  // a tokenizer.json (up to a NUL), then text it encodes; the ids decoded again
      const std::string_view all(reinterpret_cast<const char*>(data), size);
      const auto nul = std::min(all.find('\0'), all.size());
      auto t = HfTokenizer::parse(all.substr(0, nul), "fuzz");
      if (!t) break;
      const std::string_view text = all.substr(std::min(nul + 1, all.size()));
      for (const bool specials : {true, false}) {
        const auto ids = (*t)->encode(text, specials);
        for (auto id : ids)
          if (id < 0 || id >= (*t)->vocab_size()) __builtin_trap();
        (void)(*t)->decode(ids, true);
      }
      std::vector<std::int64_t> any;
      for (unsigned char c : text) any.push_back(static_cast<std::int64_t>(c) * 7 - 100);  // in and out of range
      (void)(*t)->decode(any);
      break;
    }
#endif
#if FUZZ_KIND == 25
    case 25: {  // a safetensors file; every float tensor read
      auto f = SafetensorsFile::parse(reinterpret_cast<const std::byte*>(data), size, "fuzz");
      if (!f) break;
      for (const auto& t : f->tensors()) {
        if (t.data + t.bytes > reinterpret_cast<const std::byte*>(data) + size) __builtin_trap();
        (void)st_to_f32(t);
      }
      break;
    }
#endif
  }
  return 0;
}
