// gpu.host.int8_unpack: how the int8 GEMV (gpu/kernels/gemv_kernels.cuh) reads its
// weights (gpu/kernels/int8_unpack.cuh), run on the CPU: the byte-permute unpacking of
// every int8 value at every place of a 16-byte chunk, and a matrix read back
// through the unpacking and the chunk-to-scale-group index against the CPU's
// dequantize_rows, for every group size the GPU takes and rows whose length
// is or is not a multiple of the group.
#include <doctest/doctest.h>

#ifdef PDLAB_HAVE_CUDA

#include <cstdint>
#include <cstring>
#include <vector>

#include "check.hpp"
#include "engine/quantize.hpp"
#include "gemv.cuh"
#include "int8_unpack.cuh"

using namespace pd;

TEST_CASE("gpu.host.int8_unpack.every_byte") {
    for (int v = 0; v < 256; v++)
        for (int k = 0; k < 16; k++) {
            std::uint8_t bytes[16];
            for (int b = 0; b < 16; b++) bytes[b] = std::uint8_t(b == k ? v : v * 7 + b * 31);
            uint4 w;
            std::memcpy(&w, bytes, sizeof w);
            float f[16];
            gpu::int8x16_to_float(w, f);
            for (int b = 0; b < 16; b++) {
                CAPTURE(v);
                CAPTURE(b);
                REQUIRE(f[b] == float(std::int8_t(bytes[b])));
            }
        }
}

TEST_CASE("gpu.host.int8_unpack.groups") {
    const int rows = 5;
    for (const int cols : {16, 48, 128, 272})
        for (const int group : {16, 32, 64, 128}) {
            CAPTURE(cols);
            CAPTURE(group);
            REQUIRE(gpu::gemv_int8_fits(cols, group));
            const std::vector<float> w = test::randn(std::size_t(rows) * cols, 37);
            const QuantizedMatrix m = quantize_rows(w.data(), rows, cols, group);
            // Row o's 16-byte chunks, unpacked and scaled as Int8Weights::dot does.
            const int shift = gpu::int8_group_shift(group);
            std::vector<float> got;
            for (int o = 0; o < rows; o++)
                for (int c = 0; c < cols / 16; c++) {
                    uint4 chunk;
                    std::memcpy(&chunk, m.q.data() + std::size_t(o) * cols + 16 * c, sizeof chunk);
                    float f[16];
                    gpu::int8x16_to_float(chunk, f);
                    const int g = gpu::int8_chunk_group(c, shift);
                    REQUIRE(g < m.groups_per_row());
                    for (const float x : f) got.push_back(x * m.scales[std::size_t(o) * m.groups_per_row() + g]);
                }
            test::check_close(got, dequantize_rows(m), 0.0f, 0.0f, "int8 rows read as the GPU reads them");
        }
}

#endif  // PDLAB_HAVE_CUDA
