// Weight sets and their notifications.
#include <fmt/format.h>
#include <xxhash.h>

#include <cmath>
#include <stdexcept>

#include "messages/codec_detail.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {
using namespace codec_detail;

WireBuffer encode(const WeightSetData& x, std::string_view sender) {
  std::size_t words = 64;
  for (const auto& t : x.tensors) words += (t.byte_size() + t.name.size()) / 8 + 16;
  return build(
      sender,
      [&](auto body) {
    auto w = body.initWeightSet();
    w.setVersion(x.version);
    w.setPolicyKind(kj::StringPtr(x.policy_kind.c_str()));
    auto ts = w.initTensors(static_cast<unsigned>(x.tensors.size()));
    for (unsigned i = 0; i < x.tensors.size(); ++i) {
      ts[i].setName(kj::StringPtr(x.tensors[i].name.c_str()));
      const auto& t = x.tensors[i];
      auto b = ts[i].initTensor();
      set_tensor_shape(b, t.shape, t.values);
      if (t.dtype == WeightDType::bf16) {
        b.setDtype(wire::DType::BFLOAT16);
        b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.bf16.data()), t.byte_size()));
      }
    }
    w.setChecksum(x.checksum);
    w.setCreatedUnixNs(x.created_unix_ns);
      },
      words);
}

std::string oversized_tensor(const WeightSetLayout& layout) {
  const std::uint64_t width = layout.dtype == WeightDType::bf16 ? 2 : 4;
  for (const auto& [name, shape] : layout.tensors) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    if (n * width <= kMaxWireTensorBytes) continue;
    return fmt::format(
        "the weight set's tensor {} [{}] is {:.1f} MiB in {}, more than the {} MiB one tensor of a "
        "weight set carries: hold the policy in bf16 ([policy] dtype = \"bf16\") or train LoRA "
        "adapters over it ([policy.lora])",
        name, fmt::join(shape, ", "), static_cast<double>(n * width) / (1 << 20),
        layout.dtype == WeightDType::bf16 ? "bf16" : "fp32", (kMaxWireTensorBytes + 1) >> 20);
  }
  return "";
}

EncodedWeightSet encode_weight_set(const WeightSetLayout& layout,
                                   const std::function<void(std::size_t, void*, std::size_t)>& fill,
                                   std::string_view sender) {
  if (auto why = oversized_tensor(layout); !why.empty()) throw std::length_error(why);
  EncodedWeightSet out;
  std::vector<std::uint64_t> counts;  // each tensor's values
  const std::size_t width = layout.dtype == WeightDType::bf16 ? 2 : 4;  // bytes a value
  std::size_t structure = 64 + text_words(layout.policy_kind.size()) + text_words(sender.size()), bulk = 0;
  for (const auto& [name, shape] : layout.tensors) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    counts.push_back(n);
    out.parameters += n;
    structure += text_words(name.size()) + 8 + shape.size();  // its list entry, name, Tensor and shape
    bulk += (n * width + 7) / 8;
  }
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  try {
    // The tensors' data first, each filled whole and hashed as written
    // (no memory of it zeroed), then the structure adopting them.
    out.buf = build_bulk_first(
        sender,
        [&](capnp::Orphanage o) {
          std::vector<capnp::Orphan<capnp::Data>> data;
          data.reserve(counts.size());
          for (std::size_t i = 0; i < counts.size(); ++i) {
            auto orphan = o.newOrphan<capnp::Data>(static_cast<unsigned>(counts[i] * width));
            auto bytes = orphan.get();
            // Cap'n Proto starts every Data blob on a word: values align.
            fill(i, bytes.begin(), counts[i]);
            zero_word_padding(bytes);
            XXH64_update(state, bytes.begin(), bytes.size());
            data.push_back(kj::mv(orphan));
          }
          out.checksum = XXH64_digest(state);
          return data;
        },
        [&](auto body, std::vector<capnp::Orphan<capnp::Data>>& data) {
          auto w = body.initWeightSet();
          w.setVersion(layout.version);
          w.setPolicyKind(kj::StringPtr(layout.policy_kind.c_str()));
          auto ts = w.initTensors(static_cast<unsigned>(layout.tensors.size()));
          for (unsigned i = 0; i < layout.tensors.size(); ++i) {
            const auto& [name, shape] = layout.tensors[i];
            ts[i].setName(kj::StringPtr(name.c_str()));
            auto t = ts[i].initTensor();
            t.setDtype(layout.dtype == WeightDType::bf16 ? wire::DType::BFLOAT16 : wire::DType::FLOAT32);
            auto s = t.initShape(static_cast<unsigned>(shape.size()));
            for (unsigned k = 0; k < shape.size(); ++k) s.set(k, static_cast<std::uint32_t>(shape[k]));
            t.adoptData(kj::mv(data[i]));
          }
          w.setChecksum(out.checksum);
          w.setCreatedUnixNs(layout.created_unix_ns);
        },
        bulk, structure, true);
  } catch (...) {
    XXH64_freeState(state);
    throw;
  }
  XXH64_freeState(state);
  out.buf.mark_checked();
  return out;
}

namespace {

// A weight tensor's element type: fp32 or bf16, nothing else.
WeightDType weight_dtype(wire::DType d, const std::string& name) {
  if (d == wire::DType::FLOAT32) return WeightDType::f32;
  if (d == wire::DType::BFLOAT16) return WeightDType::bf16;
  invalid("weights: tensor " + name + " is neither float32 nor bfloat16");
}

// n values at `first`: a view kept alive by `keep` where they align, a copy otherwise.
template <class T>
Column<T> viewed(const kj::byte* first, std::uint64_t n, const std::shared_ptr<const void>& keep) {
  const auto* p = reinterpret_cast<const T*>(first);
  return reinterpret_cast<std::uintptr_t>(first) % alignof(T) == 0 ? Column<T>::view(p, n, keep) : Column<T>(p, p + n);
}

}  // namespace

// The tensors are views of `buf`; the checksum is computed over them
// unless a weight store or relay already checked this very buffer.
template <>
Result<WeightSetData> decode<WeightSetData>(const WireBuffer& buf, const DecodeOptions& options) {
  if (buf.is_borrowed()) return decode<WeightSetData>(buf.owned(), options);  // its tensors view the bytes
  return decode_body<WeightSetData>(buf, options, Which::WEIGHT_SET, [&](auto body) {
    auto w = body.getWeightSet();
    WeightSetData x;
    x.version = w.getVersion();
    x.policy_kind = w.getPolicyKind().cStr();
    const auto keep = buf.keepalive();
    for (auto t : w.getTensors()) {
      NamedTensor nt;
      nt.name = t.getName().cStr();
      auto tr = t.getTensor();
      nt.dtype = weight_dtype(tr.getDtype(), nt.name);
      std::uint64_t n = 1;
      for (auto d : tr.getShape()) {
        nt.shape.push_back(d);
        n *= d;
      }
      if (tr.getData().size() != n * (nt.dtype == WeightDType::bf16 ? 2 : 4))
        invalid("weights: tensor " + nt.name + " data does not match shape");
      if (nt.dtype == WeightDType::bf16)
        nt.bf16 = viewed<std::uint16_t>(tr.getData().begin(), n, keep);
      else
        nt.values = viewed<float>(tr.getData().begin(), n, keep);
      x.tensors.push_back(std::move(nt));
    }
    x.checksum = w.getChecksum();
    x.created_unix_ns = w.getCreatedUnixNs();
    if (!buf.checked()) {
      if (x.compute_checksum() != x.checksum) invalid("weights: checksum mismatch");
      buf.mark_checked();
    }
    return x;
  });
}

Result<WeightSetInfo> check_weight_set(const WireBuffer& buf, const DecodeOptions& options) {
  const bool hash = !buf.checked();
  return decode_body<WeightSetInfo>(buf, options, Which::WEIGHT_SET, [&](auto body) {
    auto w = body.getWeightSet();
    WeightSetInfo info;
    info.version = w.getVersion();
    XXH64_state_t* state = XXH64_createState();
    XXH64_reset(state, 0);
    struct Free {
      XXH64_state_t* s;
      ~Free() { XXH64_freeState(s); }
    } guard{state};
    for (auto t : w.getTensors()) {
      auto tr = t.getTensor();
      const auto dtype = weight_dtype(tr.getDtype(), t.getName().cStr());
      std::uint64_t n = 1;
      for (auto d : tr.getShape()) n *= d;
      auto data = tr.getData();
      if (data.size() != n * (dtype == WeightDType::bf16 ? 2 : 4))
        invalid(std::string("weights: tensor ") + t.getName().cStr() + " data does not match shape");
      if (hash) XXH64_update(state, data.begin(), data.size());
      info.parameters += n;
    }
    if (hash) {
      if (XXH64_digest(state) != w.getChecksum()) invalid("weights: checksum mismatch");
      buf.mark_checked();
    }
    return info;
  });
}

WireBuffer encode(const WeightsAvailableData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto w = body.initWeightsAvailable();
    w.setVersion(x.version);
    w.setTotalBytes(x.total_bytes);
    w.setChunkCount(x.chunk_count);
    w.setChunkBytes(x.chunk_bytes);
  });
}

template <>
Result<WeightsAvailableData> decode<WeightsAvailableData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightsAvailableData>(buf, options, Which::WEIGHTS_AVAILABLE, [](auto body) {
    auto w = body.getWeightsAvailable();
    WeightsAvailableData x{w.getVersion(), w.getTotalBytes(), w.getChunkCount(), w.getChunkBytes()};
    if (x.chunk_count != weight_chunk_count(x.total_bytes, x.chunk_bytes)) invalid("weights available: chunk count does not match sizes");
    return x;
  });
}

WireBuffer encode(const WeightRequestData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto w = body.initWeightRequest();
    w.setVersion(x.version);
    w.setLatest(x.latest);
    w.setChunked(x.chunked);
    w.setChunk(x.chunk);
    if (x.base) {
      w.setHasBase(true);
      w.setBase(*x.base);
    }
  });
}

template <>
Result<WeightRequestData> decode<WeightRequestData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightRequestData>(buf, options, Which::WEIGHT_REQUEST, [](auto body) {
    auto w = body.getWeightRequest();
    WeightRequestData x{w.getVersion(), w.getLatest(), w.getChunked(), w.getChunk()};
    if (w.getHasBase()) x.base = w.getBase();
    return x;
  });
}

WireBuffer encode(const WeightChunkData& x, std::string_view sender) {
  return build(
      sender,
      [&](auto body) {
        auto c = body.initWeightChunk();
        c.setVersion(x.version);
        c.setIndex(x.index);
        c.setCount(x.count);
        c.setTotalBytes(x.total_bytes);
        c.setOffset(x.offset);
        c.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(x.data.data()), x.data.size()));
        c.setChecksum(x.checksum);
        c.setChecksumKind(static_cast<wire::ChunkChecksum>(x.checksum_kind));
        if (x.delta) {
          c.setEncoding(wire::ChunkEncoding::XOR_DELTA);
          c.setBase(x.base);
          c.setPlainChecksum(x.plain_checksum);
        }
      },
      x.data.size() / 8 + 32);
}

// Checks the chunk against itself: a bad checksum or an impossible
// position is an error, so a corrupted chunk is never assembled.
template <>
Result<WeightChunkData> decode<WeightChunkData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightChunkData>(buf, options, Which::WEIGHT_CHUNK, [](auto body) {
    auto c = body.getWeightChunk();
    WeightChunkData x;
    x.version = c.getVersion();
    x.index = c.getIndex();
    x.count = c.getCount();
    x.total_bytes = c.getTotalBytes();
    x.offset = c.getOffset();
    auto d = c.getData();
    x.data.assign(d.begin(), d.end());
    x.checksum = c.getChecksum();
    switch (c.getChecksumKind()) {
      case wire::ChunkChecksum::XXH64: x.checksum_kind = ChunkChecksum::xxh64; break;
      case wire::ChunkChecksum::CRC64: x.checksum_kind = ChunkChecksum::crc64; break;
      default: invalid("weight chunk: unknown checksum kind");
    }
    switch (c.getEncoding()) {
      case wire::ChunkEncoding::RAW: break;
      case wire::ChunkEncoding::XOR_DELTA:
        x.delta = true;
        x.base = c.getBase();
        x.plain_checksum = c.getPlainChecksum();
        break;
      default: invalid("weight chunk: unknown encoding");
    }
    if (x.count == 0 || x.index >= x.count) invalid("weight chunk: index out of range");
    if (x.offset > x.total_bytes || x.data.size() > x.total_bytes - x.offset)
      invalid("weight chunk: data lies outside the set");
    if (chunk_checksum(x.data.data(), x.data.size(), x.checksum_kind) != x.checksum)
      invalid("weight chunk: checksum mismatch");
    return x;
  });
}

}  // namespace rlx
