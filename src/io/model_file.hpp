// Opening the files of a model folder, which may come from anyone: only
// regular files are read. A FIFO would block open() or read() forever and a
// folder fails deep inside a parser, so both are refused up front (exit 2).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace pd {

// config.json and the index are kilobytes, the largest tokenizer.json ~35 MB.
constexpr std::size_t kMaxJsonFileBytes = std::size_t(64) << 20;

// A read-only descriptor of the regular file at `path` (the caller closes it).
// Opened non-blocking, so that a FIFO is seen by fstat() instead of hanging;
// a UserError for a missing file (with `hint` appended), a FIFO, a folder or
// a device.
int open_regular_file(const std::filesystem::path& path, const std::string& hint = "");

// The whole regular file, refused when larger than `max_bytes`.
std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes,
                              const std::string& hint = "");

}  // namespace pd
