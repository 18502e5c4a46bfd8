// Writing NumPy .npy files (version 1.0, little-endian float32, C order).
#pragma once

#include <filesystem>
#include <vector>

namespace pd {

void write_npy(const std::filesystem::path& path, const float* data, const std::vector<long>& shape);

}  // namespace pd
