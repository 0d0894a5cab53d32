// Whole-file writes that survive a crash: a temporary file beside the
// target, fsync, rename over the target, fsync of the directory. A reader
// sees the old file or the new one, never a part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "core/error.hpp"

namespace rlx {

Result<bool> write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace rlx
