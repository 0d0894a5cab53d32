// Weight sets and their notifications.
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "messages/codec_detail.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {
using namespace codec_detail;

namespace {

// One entry of a set's tensor list: tensor `tensor`'s values [first,
// first + n), shaped `shape`; `continues` when its rows go on in the next.
struct Piece {
  std::size_t tensor = 0;
  std::uint64_t first = 0, n = 0;
  std::vector<std::int64_t> shape;
  bool continues = false;
};

std::uint64_t count_of(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

// The values in one row of a tensor of `shape` (past its first dimension).
std::uint64_t row_of(const std::vector<std::int64_t>& shape) {
  const auto n = count_of(shape);
  return shape.empty() || shape[0] == 0 ? n : n / static_cast<std::uint64_t>(shape[0]);
}

// The entries tensors of these shapes and widths (bytes a value) travel
// as: whole, or whole rows of the first dimension, each at most max_blob
// bytes. Throws std::length_error for a row over max_blob (encode_weight_set
// names the tensor first: oversized_tensor).
std::vector<Piece> pieces_of(const std::vector<std::vector<std::int64_t>>& shapes,
                             const std::vector<std::uint64_t>& widths, std::uint64_t max_blob) {
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& shape = shapes[i];
    const auto n = count_of(shape);
    if (n * widths[i] <= max_blob || shape.empty() || shape[0] == 0) {
      pieces.push_back({i, 0, n, shape, false});
      continue;
    }
    const auto rows = static_cast<std::uint64_t>(shape[0]), row = row_of(shape);
    const auto per = max_blob / (row * widths[i]);
    if (per == 0) throw std::length_error(fmt::format("weights: a row of tensor {} is over {} bytes", i, max_blob));
    for (std::uint64_t r = 0; r < rows; r += per) {
      const auto k = std::min(per, rows - r);
      auto part = shape;
      part[0] = static_cast<std::int64_t>(k);
      pieces.push_back({i, r * row, k * row, std::move(part), r + k < rows});
    }
  }
  return pieces;
}

}  // namespace

WireBuffer encode(const WeightSetData& x, std::string_view sender) {
  std::size_t words = 64;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::uint64_t> widths;
  for (const auto& t : x.tensors) {
    words += (t.byte_size() + t.name.size()) / 8 + 16;
    shapes.push_back(t.shape);
    widths.push_back(t.dtype == WeightDType::bf16 ? 2 : 4);
  }
  const auto pieces = pieces_of(shapes, widths, kMaxWireTensorBytes);
  words += 16 * pieces.size();
  return build(
      sender,
      [&](auto body) {
    auto w = body.initWeightSet();
    w.setVersion(x.version);
    w.setPolicyKind(kj::StringPtr(x.policy_kind.c_str()));
    auto ts = w.initTensors(static_cast<unsigned>(pieces.size()));
    for (unsigned i = 0; i < pieces.size(); ++i) {
      const auto& p = pieces[i];
      const auto& t = x.tensors[p.tensor];
      ts[i].setName(kj::StringPtr(t.name.c_str()));
      ts[i].setContinues(p.continues);
      auto b = ts[i].initTensor();
      if (t.dtype == WeightDType::bf16) {
        set_tensor_shape(b, p.shape, {});
        b.setDtype(wire::DType::BFLOAT16);
        b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.bf16.data() + p.first), p.n * 2));
      } else {
        set_tensor_shape(b, p.shape, t.values.span().subspan(p.first, p.n));
      }
    }
    w.setChecksum(x.checksum);
    w.setCreatedUnixNs(x.created_unix_ns);
      },
      words);
}

std::string oversized_tensor(const WeightSetLayout& layout, std::uint64_t max_blob) {
  const std::uint64_t width = layout.dtype == WeightDType::bf16 ? 2 : 4;
  for (const auto& [name, shape] : layout.tensors) {
    const auto row = row_of(shape);
    if (row * width <= max_blob) continue;
    return fmt::format(
        "the weight set's tensor {} [{}] has rows of {:.1f} MiB in {}, more than the {:.1f} MiB one entry of a "
        "weight set carries (a larger tensor travels a row at a time): hold the policy in bf16 ([policy] dtype = "
        "\"bf16\") or train LoRA adapters over it ([policy.lora])",
        name, fmt::join(shape, ", "), static_cast<double>(row * width) / (1 << 20),
        layout.dtype == WeightDType::bf16 ? "bf16" : "fp32", static_cast<double>(max_blob + 1) / (1 << 20));
  }
  return "";
}

EncodedWeightSet encode_weight_set(const WeightSetLayout& layout, const WeightFill& fill, std::string_view sender,
                                   std::uint64_t max_blob) {
  if (auto why = oversized_tensor(layout, max_blob); !why.empty()) throw std::length_error(why);
  EncodedWeightSet out;
  const std::size_t width = layout.dtype == WeightDType::bf16 ? 2 : 4;  // bytes a value
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& [name, shape] : layout.tensors) {
    shapes.push_back(shape);
    out.parameters += count_of(shape);
  }
  const auto pieces = pieces_of(shapes, std::vector<std::uint64_t>(shapes.size(), width), max_blob);
  std::size_t structure = 64 + text_words(layout.policy_kind.size()) + text_words(sender.size()), bulk = 0;
  for (const auto& p : pieces) {  // its list entry, name, Tensor and shape
    structure += text_words(layout.tensors[p.tensor].first.size()) + 8 + p.shape.size();
    bulk += (p.n * width + 7) / 8;
  }
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  try {
    // The tensors' data first, each entry filled whole and hashed as
    // written (no memory of it zeroed), then the structure adopting them.
    out.buf = build_bulk_first(
        sender,
        [&](capnp::Orphanage o) {
          std::vector<capnp::Orphan<capnp::Data>> data;
          data.reserve(pieces.size());
          for (const auto& p : pieces) {
            auto orphan = o.newOrphan<capnp::Data>(static_cast<unsigned>(p.n * width));
            auto bytes = orphan.get();
            // Cap'n Proto starts every Data blob on a word: values align.
            fill(p.tensor, bytes.begin(), p.first, p.n);
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
          auto ts = w.initTensors(static_cast<unsigned>(pieces.size()));
          for (unsigned i = 0; i < pieces.size(); ++i) {
            const auto& p = pieces[i];
            ts[i].setName(kj::StringPtr(layout.tensors[p.tensor].first.c_str()));
            ts[i].setContinues(p.continues);
            auto t = ts[i].initTensor();
            t.setDtype(layout.dtype == WeightDType::bf16 ? wire::DType::BFLOAT16 : wire::DType::FLOAT32);
            auto s = t.initShape(static_cast<unsigned>(p.shape.size()));
            for (unsigned k = 0; k < p.shape.size(); ++k) s.set(k, static_cast<std::uint32_t>(p.shape[k]));
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

// Whether `more` is more rows of `open`: its name, dtype and every
// dimension but the first.
bool rows_of(const NamedTensor& more, const NamedTensor& open) {
  return more.name == open.name && more.dtype == open.dtype && more.shape.size() == open.shape.size() &&
         !more.shape.empty() && std::equal(more.shape.begin() + 1, more.shape.end(), open.shape.begin() + 1);
}

// n values in `parts`, one after another, copied into memory of their own
// (a view that keeps it: a policy views it as it views the set's bytes).
template <class T>
Column<T> joined(const std::vector<kj::ArrayPtr<const kj::byte>>& parts, std::uint64_t n) {
  auto own = std::make_shared<std::vector<T>>(n);
  auto* at = reinterpret_cast<kj::byte*>(own->data());
  for (const auto& p : parts) {
    std::memcpy(at, p.begin(), p.size());
    at += p.size();
  }
  const T* first = own->data();
  return Column<T>::view(first, n, std::move(own));
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
    NamedTensor open;  // a tensor whose rows go on in the next entries
    std::vector<kj::ArrayPtr<const kj::byte>> parts;
    std::uint64_t open_n = 0;
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
      const auto data = tr.getData();
      if (data.size() != n * (nt.dtype == WeightDType::bf16 ? 2 : 4))
        invalid("weights: tensor " + nt.name + " data does not match shape");
      if (!parts.empty()) {  // more rows of `open`
        if (!rows_of(nt, open))
          invalid("weights: tensor " + open.name + " continues into " + nt.name + ", which is not more rows of it");
        open.shape[0] += nt.shape[0];
        open_n += n;
        parts.push_back(data);
        if (t.getContinues()) continue;
        if (open.dtype == WeightDType::bf16)
          open.bf16 = joined<std::uint16_t>(parts, open_n);
        else
          open.values = joined<float>(parts, open_n);
        x.tensors.push_back(std::move(open));
        parts.clear();
        continue;
      }
      if (t.getContinues()) {
        if (nt.shape.empty()) invalid("weights: tensor " + nt.name + " continues, but a scalar has no rows");
        open = std::move(nt);
        open_n = n;
        parts.push_back(data);
        continue;
      }
      if (nt.dtype == WeightDType::bf16)
        nt.bf16 = viewed<std::uint16_t>(data.begin(), n, keep);
      else
        nt.values = viewed<float>(data.begin(), n, keep);
      x.tensors.push_back(std::move(nt));
    }
    if (!parts.empty()) invalid("weights: tensor " + open.name + " continues past the set's last entry");
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
