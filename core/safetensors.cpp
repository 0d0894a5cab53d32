#include "core/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_int.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own bound

struct DtypeInfo {
  StDtype dtype;
  const char* name;
  std::size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {StDtype::f64, "F64", 8}, {StDtype::f32, "F32", 4}, {StDtype::f16, "F16", 2}, {StDtype::bf16, "BF16", 2},
    {StDtype::i64, "I64", 8}, {StDtype::i32, "I32", 4}, {StDtype::i16, "I16", 2}, {StDtype::i8, "I8", 1},
    {StDtype::u8, "U8", 1},   {StDtype::boolean, "BOOL", 1},
};

Error st_error(const std::string& file, const std::string& why) {
  return make_error(Errc::invalid_field, file + ": " + why);
}

// A non-negative integer of a JSON value, or -1.
std::int64_t whole(const json& v) { return std::max<std::int64_t>(json_int64(v).value_or(-1), -1); }

}  // namespace

const char* st_dtype_name(StDtype d) {
  for (const auto& i : kDtypes)
    if (i.dtype == d) return i.name;
  return "?";
}

std::size_t st_dtype_size(StDtype d) {
  for (const auto& i : kDtypes)
    if (i.dtype == d) return i.size;
  return 0;
}

std::int64_t StTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(Errc::io, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return st_error(path, "not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return st_error(path, fmt::format("{} bytes: shorter than the 8-byte header length", size));
  }
  void* at = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (at == MAP_FAILED) return make_error(Errc::io, fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
  std::shared_ptr<const void> owner(at, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  auto f = parse(static_cast<const std::byte*>(at), size, path, std::move(owner));
  if (f)
    for (auto& t : f->tensors_) t.mapped = true;
  return f;
}

namespace {

// The whole pages around part of a mapped tensor's bytes: [begin, end).
std::pair<std::uintptr_t, std::uintptr_t> page_span(const StTensor& t, std::size_t first_byte, std::size_t bytes) {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<std::uintptr_t>(t.data) + first_byte;
  return {at & ~(page - 1), at + bytes};
}

}  // namespace

void st_prefetch(const StTensor& t, std::size_t first_byte, std::size_t bytes) {
#ifdef MADV_POPULATE_READ
  if (!t.mapped || first_byte >= t.bytes) return;
  const auto [begin, end] = page_span(t, first_byte, std::min(bytes, t.bytes - first_byte));
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);  // EINVAL before Linux 5.14: faults instead
#else
  (void)t, (void)first_byte, (void)bytes;
#endif
}

void st_release(const StTensor& t, std::size_t first_byte, std::size_t bytes) {
  if (!t.mapped || first_byte >= t.bytes) return;
  bytes = std::min(bytes, t.bytes - first_byte);
  // Whole pages around the tensor: a neighbour's page dropped too is read
  // back from the file when it is next touched (the mapping is private
  // and read-only, never written).
  const auto [begin, end] = page_span(t, first_byte, bytes);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Result<SafetensorsFile> SafetensorsFile::parse(const std::byte* data, std::size_t size, std::string name,
                                               std::shared_ptr<const void> owner) {
  if (size < 8) return st_error(name, fmt::format("{} bytes: shorter than the 8-byte header length", size));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(data[i]);
  if (n > kMaxHeaderBytes) return st_error(name, fmt::format("a header of {} bytes: past the format's 100 MB", n));
  if (n > size - 8) return st_error(name, fmt::format("a header of {} bytes in a file of {}", n, size));
  const std::string_view header(reinterpret_cast<const char*>(data + 8), n);
  const json h = json::parse(header, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return st_error(name, "the header is not a JSON object");
  const std::size_t data_size = size - 8 - n;
  SafetensorsFile f;
  f.name_ = std::move(name);
  f.owner_ = std::move(owner);
  struct Range {
    std::int64_t begin, end;
    std::size_t index;
  };
  std::vector<Range> ranges;
  for (const auto& [key, v] : h.items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) return st_error(f.name_, "__metadata__ must be an object of strings");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) return st_error(f.name_, "__metadata__." + mk + " must be a string");
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string& tensor = key;  // (clang 14 captures no structured binding)
    const auto fail = [&](const std::string& why) { return st_error(f.name_, "tensor " + tensor + ": " + why); };
    if (key.empty()) return st_error(f.name_, "a tensor with an empty name");
    if (!v.is_object()) return fail("must be an object with dtype, shape and data_offsets");
    const auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return fail("no dtype");
    const auto info = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                   [&](const DtypeInfo& i) { return dt->get_ref<const std::string&>() == i.name; });
    if (info == std::end(kDtypes)) return fail("dtype " + dt->get<std::string>() + " is not supported");
    if (sh == v.end() || !sh->is_array() || sh->size() > 16) return fail("shape must be an array of at most 16 sizes");
    StTensor t;
    t.name = key;
    t.dtype = info->dtype;
    std::uint64_t count = 1;
    for (const auto& d : *sh) {
      const auto x = whole(d);
      if (x < 0) return fail("a dimension that is not a non-negative integer");
      if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(x), &count)) return fail("its size overflows");
      t.shape.push_back(x);
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(info->size), &bytes)) return fail("its size overflows");
    if (off == v.end() || !off->is_array() || off->size() != 2) return fail("data_offsets must be [begin, end]");
    const auto b = whole((*off)[0]), e = whole((*off)[1]);
    if (b < 0 || e < b) return fail("data_offsets must be 0 <= begin <= end");
    if (static_cast<std::uint64_t>(e) > data_size)
      return fail(fmt::format("its bytes end at {}, past the {} bytes of data", e, data_size));
    if (static_cast<std::uint64_t>(e - b) != bytes)
      return fail(fmt::format("{} x {} needs {} bytes; its range holds {}", info->name, fmt::join(t.shape, "x"), bytes,
                              e - b));
    t.data = data + 8 + n + b;
    t.bytes = static_cast<std::size_t>(bytes);
    ranges.push_back({b, e, f.tensors_.size()});
    f.tensors_.push_back(std::move(t));
  }
  // The ranges tile the data: no overlap, no hole.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::int64_t at = 0;
  for (const auto& r : ranges) {
    const auto& t = f.tensors_[r.index];
    if (r.begin < at) return st_error(f.name_, fmt::format("tensor {} overlaps the one before it (byte {})", t.name, r.begin));
    if (r.begin > at) return st_error(f.name_, fmt::format("bytes {}..{} belong to no tensor", at, r.begin));
    at = r.end;
  }
  if (static_cast<std::uint64_t>(at) != data_size)
    return st_error(f.name_, fmt::format("bytes {}..{} belong to no tensor", at, data_size));
  std::vector<StTensor> ordered;
  for (const auto& r : ranges) ordered.push_back(std::move(f.tensors_[r.index]));
  f.tensors_ = std::move(ordered);
  return f;
}

const StTensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

float bf16_to_f32(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::uint16_t f32_to_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf, nan
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

Result<void> st_to_f32(const StTensor& t, std::size_t first, std::size_t count, float* out) {
  RLX_REQUIRE(first + count <= static_cast<std::size_t>(t.numel()), t.name, first, count);
  switch (t.dtype) {
    case StDtype::f32:
      std::memcpy(out, t.data + 4 * first, count * 4);
      return {};
    case StDtype::f16:
    case StDtype::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t h;
        std::memcpy(&h, t.data + 2 * (first + i), 2);
        out[i] = t.dtype == StDtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return {};
    default:
      return make_error(Errc::invalid_field, fmt::format("tensor {}: {} is not a floating dtype", t.name, st_dtype_name(t.dtype)));
  }
}

Result<std::vector<float>> st_to_f32(const StTensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (auto r = st_to_f32(t, 0, out.size(), out.data()); !r) return r.error();
  return out;
}

Result<void> write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::uint64_t at = 0;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    std::uint64_t count = 1;
    for (auto d : t.shape) count *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
    if (t.name.empty() || t.name == "__metadata__" || !seen.insert(t.name).second)
      return make_error(Errc::invalid_field, fmt::format("{}: tensor name '{}' is empty, reserved or repeated", path, t.name));
    if (count * st_dtype_size(t.dtype) != t.bytes)
      return make_error(Errc::invalid_field, fmt::format("{}: tensor {}: {} bytes for {} elements of {}", path, t.name,
                                                         t.bytes, count, st_dtype_name(t.dtype)));
    h[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes}}};
    at += t.bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  const auto failed = [&](const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return make_error(Errc::io, why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xFF);
    out.write(len, 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& t : tensors) {
      if (!t.write) {
        out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
        continue;
      }
      const auto before = out.tellp();
      if (!t.write(out) || out.tellp() - before != static_cast<std::streamoff>(t.bytes))
        return failed(fmt::format("{}: tensor {}: its writer did not give its {} bytes", path, t.name, t.bytes));
    }
    out.flush();
    if (!out) return failed(fmt::format("{}: cannot write", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error(Errc::io, fmt::format("{}: cannot rename into place: {}", path, ec.message()));
  return {};
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint c;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> expected;  // tensor -> shard file
  if (fs::exists(index)) {
    std::ifstream in(index);
    const json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return st_error(index.string(), "not a JSON object with a \"weight_map\" object");
    std::set<std::string> shards;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) return st_error(index.string(), "weight_map." + tensor + " must be a file name");
      const auto f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        return st_error(index.string(), "weight_map." + tensor + ": '" + f + "' is not a file of this folder");
      expected[tensor] = f;
      shards.insert(f);
    }
    for (const auto& s : shards) {
      auto file = SafetensorsFile::open((fs::path(dir) / s).string());
      if (!file) return file.error();
      c.files_.push_back(std::move(*file));
    }
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    auto file = SafetensorsFile::open((fs::path(dir) / "model.safetensors").string());
    if (!file) return file.error();
    c.files_.push_back(std::move(*file));
  } else {
    return make_error(Errc::not_found, dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& f : c.files_) {
    const auto shard = fs::path(f.name()).filename().string();
    for (const auto& t : f.tensors()) {
      if (!expected.empty()) {
        auto e = expected.find(t.name);
        if (e == expected.end()) return st_error(f.name(), "tensor " + t.name + " is not in the index's weight_map");
        if (e->second != shard) return st_error(f.name(), "tensor " + t.name + ": the index puts it in " + e->second);
      }
      if (!c.by_name_.emplace(t.name, &t).second) return st_error(f.name(), "tensor " + t.name + " is in two files");
    }
  }
  for (const auto& [tensor, shard] : expected)
    if (!c.by_name_.count(tensor)) return st_error(shard, "tensor " + tensor + ", which the index names, is not in it");
  return c;
}

const StTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : by_name_) out.push_back(n);
  return out;
}

}  // namespace rlx
