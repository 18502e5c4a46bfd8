// gpu.host.flash_index: the flash prefill's index math (gpu/kernels/flash_index.cuh)
// run on the CPU the way tiled_attention_kernel (gpu/kernels/attention_pair.cu) runs
// it: blocks of kFlashBr queries, warps of 16 rows, key tiles of kFlashBc
// (zero-padded past the sequence, as the kernel stages them), the causal
// count per row and tile, the tiles a warp skips, and the online softmax;
// against the CPU engine's attention_prefill. f32 throughout: the kernel's
// bf16 rounding and tensor-core products are what a GPU run has left to test.
// Ragged query counts (either side of a tile and of a block), cached prefixes,
// head dims 16 to 64, MHA, GQA and MQA.
#include <doctest/doctest.h>

#ifdef PDLAB_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "check.hpp"
#include "decode_index.cuh"
#include "engine/attention.hpp"
#include "engine/kv_cache.hpp"
#include "flash_index.cuh"

using namespace pd;

namespace {

constexpr int kRows = 16;  // a warp's query rows (one tensor-core tile high)

// Key t of the tile at j0 for KV head g: a cached row, or zeros past the
// tile's keys (stage_rows pads the tile so).
const float* tile_key(const KVCache& c, bool value, int g, int j0, int t, int keys, const std::vector<float>& zeros) {
    if (t >= keys) return zeros.data();
    return value ? kv_value(c, 0, 0, g, j0 + t) : kv_key(c, 0, 0, g, j0 + t);
}

// Query rows i0 .. i0+15 of head h, as one warp of block b0 computes them:
// writes out (T, n_heads * D) for the rows below T.
void warp_rows(float* out, const float* q, const KVCache& c, const gpu::AttentionShape& s, int h, int b0, int i0) {
    const int D = s.D, g = gpu::kv_head_of(h, s.n_heads, s.n_kv_heads);
    const float scale = 1.0f / std::sqrt(float(D));
    const std::vector<float> zeros(D, 0.0f);
    gpu::RunningSoftmax rows[kRows];
    std::vector<float> O(std::size_t(kRows) * D, 0.0f);
    const int block_keys = gpu::flash_block_keys(s, b0), warp_keys = gpu::flash_warp_keys(s, i0, kRows);
    for (int j0 = 0; j0 < block_keys; j0 += gpu::kFlashBc) {
        const int keys = gpu::flash_tile_keys(s, j0);
        REQUIRE(keys >= 1);
        if (j0 >= warp_keys) continue;
        for (int r = 0; r < kRows; r++) {
            const int n = std::min(gpu::flash_row_keys(s, i0 + r, j0), gpu::kFlashBc);  // lanes 0..63 hold the tile
            if (n <= 0) continue;
            const float* qi = q + (std::size_t(i0 + r) * s.n_heads + h) * D;
            std::vector<float> sc(n);
            float tile_max = -INFINITY;
            for (int t = 0; t < n; t++) {
                const float* k = tile_key(c, false, g, j0, t, keys, zeros);
                float dot = 0.0f;
                for (int d = 0; d < D; d++) dot += qi[d] * k[d];
                sc[t] = dot * scale;
                tile_max = std::max(tile_max, sc[t]);
            }
            const float alpha = rows[r].rescale_to(tile_max);
            float* o = O.data() + std::size_t(r) * D;
            for (int d = 0; d < D; d++) o[d] *= alpha;
            float sum = 0.0f;
            for (int t = 0; t < n; t++) {
                const float p = std::exp(sc[t] - rows[r].m);
                sum += p;
                const float* v = tile_key(c, true, g, j0, t, keys, zeros);
                for (int d = 0; d < D; d++) o[d] += p * v[d];
            }
            rows[r].add(sum);
        }
    }
    for (int r = 0; r < kRows && i0 + r < s.T; r++) {
        REQUIRE(rows[r].l >= 1.0f);  // the row's largest score contributes e^0
        for (int d = 0; d < D; d++)
            out[(std::size_t(i0 + r) * s.n_heads + h) * D + d] = O[std::size_t(r) * D + d] / rows[r].l;
    }
}

}  // namespace

TEST_CASE("gpu.host.flash_index") {
    struct Case {
        int T, start, n_heads, n_kv_heads, D;
    };
    std::mt19937 rng(37);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const Case k : {Case{1, 0, 2, 1, 16}, Case{1, 130, 4, 2, 16}, Case{15, 0, 4, 4, 32}, Case{16, 3, 6, 2, 16},
                         Case{17, 64, 2, 2, 48}, Case{64, 0, 8, 2, 16}, Case{65, 1, 4, 1, 32},
                         Case{130, 70, 4, 2, 16}, Case{200, 0, 2, 1, 64}}) {
        CAPTURE(k.T);
        CAPTURE(k.start);
        CAPTURE(k.n_heads);
        CAPTURE(k.n_kv_heads);
        CAPTURE(k.D);
        const int S = k.start + k.T, H = k.n_heads, D = k.D;
        KVCache cpu = make_kv_cache(1, 1, k.n_kv_heads, S, D);
        std::vector<float> k_new(std::size_t(k.n_kv_heads) * D), v_new(k_new.size());
        for (int p = 0; p < S; p++) {
            for (float& x : k_new) x = normal(rng);
            for (float& x : v_new) x = normal(rng);
            kv_write(cpu, 0, 0, p, k_new.data(), v_new.data());
        }
        std::vector<float> q(std::size_t(k.T) * H * D), ref(q.size()), got(q.size(), NAN);
        for (float& x : q) x = normal(rng);
        attention_prefill(ref.data(), q.data(), cpu, 0, 0, k.start, k.T, H);

        // The kernel's grid: (ceil(T / kFlashBr), n_heads) blocks of kFlashBr / 16 warps.
        const gpu::AttentionShape s{k.T, S, H, k.n_kv_heads, D};
        for (int h = 0; h < H; h++)
            for (int b0 = 0; b0 < k.T; b0 += gpu::kFlashBr)
                for (int i0 = b0; i0 < b0 + gpu::kFlashBr; i0 += kRows)
                    warp_rows(got.data(), q.data(), cpu, s, h, b0, i0);
        test::check_close(got, ref, 1e-5f, 1e-4f, "flash prefill walked on the CPU vs attention_prefill");
    }
}

#endif  // PDLAB_HAVE_CUDA
