// The safetensors format (Hugging Face checkpoints; issue 26): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and byte range in the data that follows (and an optional
// "__metadata__" of strings), then the data. Files are memory-mapped, not
// read: a tensor is a view into the mapping, alive while any view of the
// file is.
//
// The reader trusts nothing: the header length must fit the file (and
// 100 MB, the format's own bound); the header must be a JSON object;
// every tensor's dtype known, its dimensions non-negative, its byte count
// (elements x dtype size, without overflow) equal to its range; ranges
// inside the data, not overlapping, and together covering it with no
// hole (as the format requires). Each refusal names the tensor and what
// was wrong. `fuzz_safetensors` feeds it arbitrary bytes. CAF-free,
// torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace rlx {

enum class StDtype : std::uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };
const char* st_dtype_name(StDtype d);  // "F32", "BF16", ...
std::size_t st_dtype_size(StDtype d);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<std::int64_t> shape;
  const std::byte* data = nullptr;  // into the file's mapping (or buffer)
  std::size_t bytes = 0;
  bool mapped = false;              // data is a file's mapping (SafetensorsFile::open)
  std::int64_t numel() const;
};

// A mapped tensor's pages handed back to the kernel once its values are
// copied out (they are read from the file again if touched): a loader's
// resident memory then grows by the model, not by the model and the
// file. A no-op for a tensor in a buffer.
// `first_byte`, `bytes`: only that part of the tensor's bytes.
void st_release(const StTensor& t, std::size_t first_byte = 0, std::size_t bytes = SIZE_MAX);
// The part's pages mapped in one call before it is read (far fewer page
// faults than touching it page by page); a no-op where the kernel cannot.
void st_prefetch(const StTensor& t, std::size_t first_byte, std::size_t bytes);

class SafetensorsFile {
 public:
  // Maps and checks a file.
  static Result<SafetensorsFile> open(const std::string& path);
  // Checks bytes held elsewhere (kept alive by `owner`); `name` for messages.
  static Result<SafetensorsFile> parse(const std::byte* data, std::size_t size, std::string name,
                                       std::shared_ptr<const void> owner = nullptr);

  const std::vector<StTensor>& tensors() const { return tensors_; }  // in file order
  const StTensor* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const void> owner_;  // the mapping
  std::vector<StTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A tensor's values as float (F32, F16 and BF16 exactly; others refused).
Result<std::vector<float>> st_to_f32(const StTensor& t);
// Elements [first, first + count) of them into `out` (a loader's chunk).
// REQUIRES: first + count <= t.numel().
Result<void> st_to_f32(const StTensor& t, std::size_t first, std::size_t count, float* out);
// float to BF16 bits, rounding to nearest even (NaN stays NaN).
std::uint16_t f32_to_bf16(float x);
float bf16_to_f32(std::uint16_t b);
float f16_to_f32(std::uint16_t h);

// One tensor to write: its bytes are the caller's until the write returns,
// or, with `write`, made as they are written: `write` puts exactly `bytes`
// bytes into the stream (and returns false when it cannot), so that a
// file of any size is written holding one tensor's conversion at a time.
struct StTensorOut {
  StTensorOut(std::string name_, StDtype dtype_, std::vector<std::int64_t> shape_, const void* data_, std::size_t bytes_,
              std::function<bool(std::ostream&)> write_ = {})
      : name(std::move(name_)), dtype(dtype_), shape(std::move(shape_)), data(data_), bytes(bytes_),
        write(std::move(write_)) {}
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::function<bool(std::ostream&)> write;
};
// Writes a file (atomically: a temporary beside it, then renamed), tensors
// in the order given, the header padded with spaces to 8 bytes as the
// reference writer does.
Result<void> write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// A checkpoint folder: model.safetensors, or the shards
// model.safetensors.index.json names (its "weight_map": tensor -> file).
// Every tensor the index names must be in its shard and every shard's
// tensor in the index; a tensor in two files is refused.
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open(const std::string& dir);
  SafetensorsCheckpoint(SafetensorsCheckpoint&&) = default;  // (names point into files_: no copies)
  SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) = default;
  SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
  const StTensor* find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  SafetensorsCheckpoint() = default;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, const StTensor*, std::less<>> by_name_;
};

}  // namespace rlx
