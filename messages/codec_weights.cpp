// Weight sets and their notifications.
#include <cmath>

#include <xxhash.h>

#include "messages/codec_detail.hpp"

namespace rlx {
using namespace codec_detail;

std::uint64_t WeightSetData::compute_checksum() const {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const auto& t : tensors) XXH64_update(state, t.values.data(), t.values.size() * sizeof(float));
  std::uint64_t h = XXH64_digest(state);
  XXH64_freeState(state);
  return h;
}

WireBuffer encode(const WeightSetData& x, std::string_view sender) {
  std::size_t words = 64;
  for (const auto& t : x.tensors) words += (t.values.size() * 4 + t.name.size()) / 8 + 16;
  return build(
      sender,
      [&](auto body) {
    auto w = body.initWeightSet();
    w.setVersion(x.version);
    w.setPolicyKind(kj::StringPtr(x.policy_kind.c_str()));
    auto ts = w.initTensors(static_cast<unsigned>(x.tensors.size()));
    for (unsigned i = 0; i < x.tensors.size(); ++i) {
      ts[i].setName(kj::StringPtr(x.tensors[i].name.c_str()));
      set_tensor_shape(ts[i].initTensor(), x.tensors[i].shape, x.tensors[i].values);
    }
    w.setChecksum(x.checksum);
    w.setCreatedUnixNs(x.created_unix_ns);
      },
      words);
}

template <>
Result<WeightSetData> decode<WeightSetData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightSetData>(buf, options, Which::WEIGHT_SET, [](auto body) {
    auto w = body.getWeightSet();
    WeightSetData x;
    x.version = w.getVersion();
    x.policy_kind = w.getPolicyKind().cStr();
    for (auto t : w.getTensors()) {
      NamedTensor nt;
      nt.name = t.getName().cStr();
      auto tr = t.getTensor();
      if (tr.getDtype() != wire::DType::FLOAT32) invalid("weights: tensor " + nt.name + " is not float32");
      std::uint64_t n = 1;
      for (auto d : tr.getShape()) {
        nt.shape.push_back(d);
        n *= d;
      }
      if (tr.getData().size() != n * sizeof(float)) invalid("weights: tensor " + nt.name + " data does not match shape");
      nt.values.resize(n);
      if (n) std::memcpy(nt.values.data(), tr.getData().begin(), n * sizeof(float));
      x.tensors.push_back(std::move(nt));
    }
    x.checksum = w.getChecksum();
    x.created_unix_ns = w.getCreatedUnixNs();
    if (x.compute_checksum() != x.checksum) invalid("weights: checksum mismatch");
    return x;
  });
}

WireBuffer encode(const WeightsAvailableData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto w = body.initWeightsAvailable();
    w.setVersion(x.version);
    w.setTotalBytes(x.total_bytes);
    w.setChunkCount(x.chunk_count);
  });
}

template <>
Result<WeightsAvailableData> decode<WeightsAvailableData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightsAvailableData>(buf, options, Which::WEIGHTS_AVAILABLE, [](auto body) {
    auto w = body.getWeightsAvailable();
    return WeightsAvailableData{w.getVersion(), w.getTotalBytes(), w.getChunkCount()};
  });
}

WireBuffer encode(const WeightRequestData& x, std::string_view sender) {
  return build(sender, [&](auto body) {
    auto w = body.initWeightRequest();
    w.setVersion(x.version);
    w.setLatest(x.latest);
  });
}

template <>
Result<WeightRequestData> decode<WeightRequestData>(const WireBuffer& buf, const DecodeOptions& options) {
  return decode_body<WeightRequestData>(buf, options, Which::WEIGHT_REQUEST, [](auto body) {
    auto w = body.getWeightRequest();
    return WeightRequestData{w.getVersion(), w.getLatest()};
  });
}

}  // namespace rlx
