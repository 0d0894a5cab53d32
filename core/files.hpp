// Whole-file writes that survive a crash: a temporary file beside the
// target, fsync, rename over the target, fsync of the directory. A reader
// sees the old file or the new one, never a part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "core/error.hpp"

namespace rlx {

// `mode`: the file's permissions (0600 for a secret).
Result<void> write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                                   unsigned mode = 0644);

// The same, for text.
Result<void> write_text_atomically(const std::filesystem::path& path, const std::string& text, unsigned mode = 0644);

// A whole file's bytes; Errc::io with the path and the reason when it cannot be read.
Result<std::string> read_text_file(const std::filesystem::path& path);

}  // namespace rlx
