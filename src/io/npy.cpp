#include "io/npy.hpp"

#include <fstream>

#include <fmt/format.h>

#include "common.hpp"

namespace pd {

void write_npy(const std::filesystem::path& path, const float* data, const std::vector<long>& shape) {
    std::string dims;
    long n = 1;
    for (long d : shape) dims += fmt::format("{}, ", d), n *= d;
    if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (3, 4) does not
    std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
    // magic (6) + version (2) + header length (2) + header, padded to 64 bytes, ending in '\n'
    std::size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header.push_back('\n');
    std::ofstream out(path, std::ios::binary);
    if (!out) fail("cannot write {}", path.string());
    out.write("\x93NUMPY\x01\x00", 8);
    std::uint16_t len = std::uint16_t(header.size());
    out.write(reinterpret_cast<const char*>(&len), 2);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(reinterpret_cast<const char*>(data), std::streamsize(n * sizeof(float)));
    if (!out) fail("failed writing {}", path.string());
}

}  // namespace pd
