// gpu.host.kv_write_index: the KV writes' index math (gpu/kernels/kv_write_index.cuh
// and KVLayer::row) run on the CPU the way kv_write_kernel and
// rope_kv_write_kernel (gpu/kernels/kv_cache.cu) run their grid-stride loops, into a
// paged layout with a shuffled block table, against the CPU engine's rope and
// kv_write: three sequences of ragged lengths, rows in shuffled order, a row
// stride wider than the row, blocks of 1, 3, 16 and 64 positions, MHA, GQA
// and MQA. Every element must land where the CPU's cache has it, and no
// other element of the pool may be written.
#include <doctest/doctest.h>

#ifdef PDLAB_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "check.hpp"
#include "engine/kv_cache.hpp"
#include "engine/ops.hpp"
#include "kv_cache.cuh"
#include "kv_write_index.cuh"

using namespace pd;

namespace {

struct Shape {
    int n_heads, n_kv_heads, head_dim, block_size;
};

constexpr int kMaxSeq = 70;
constexpr int kLengths[] = {1, 17, kMaxSeq};  // the sequences' lengths (slots 0, 1, 2)
constexpr int kBatch = 3;

// A paged pool as kv_cache.cuh lays it out, its NaN-filled K and V, and a
// shuffled block table (kBatch, max_blocks).
struct Pool {
    std::vector<float> K, V;
    std::vector<int> table;
    gpu::KVLayer c;

    Pool(const Shape& sh, std::mt19937& rng) {
        const int mb = (kMaxSeq + sh.block_size - 1) / sh.block_size;
        table.resize(std::size_t(kBatch) * mb);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        K.assign(table.size() * sh.n_kv_heads * sh.block_size * sh.head_dim, NAN);
        V = K;
        c.k = K.data(), c.v = V.data(), c.table = table.data();
        c.batch = kBatch, c.max_blocks = mb, c.block_size = sh.block_size;
        c.n_kv_heads = sh.n_kv_heads, c.max_seq = kMaxSeq, c.head_dim = sh.head_dim;
    }

    // Where (sequence b, KV head h, position p) lives, from the layout's
    // definition in kv_cache.cuh rather than from KVLayer::row.
    std::size_t at(int b, int h, int p) const {
        const int blk = table[std::size_t(b) * c.max_blocks + p / c.block_size];
        return ((std::size_t(blk) * c.n_kv_heads + h) * c.block_size + p % c.block_size) * c.head_dim;
    }

    // Every written element equals the CPU cache's, and nothing else was written.
    void check_against(const KVCache& cpu, const char* what) const {
        std::vector<float> got, ref;
        std::size_t written = 0;
        for (std::size_t e = 0; e < K.size(); e++) written += !std::isnan(K[e]) + !std::isnan(V[e]);
        for (int b = 0; b < kBatch; b++)
            for (int h = 0; h < c.n_kv_heads; h++)
                for (int p = 0; p < kLengths[b]; p++) {
                    got.insert(got.end(), K.begin() + at(b, h, p), K.begin() + at(b, h, p) + c.head_dim);
                    got.insert(got.end(), V.begin() + at(b, h, p), V.begin() + at(b, h, p) + c.head_dim);
                    ref.insert(ref.end(), kv_key(cpu, 0, b, h, p), kv_key(cpu, 0, b, h, p) + c.head_dim);
                    ref.insert(ref.end(), kv_value(cpu, 0, b, h, p), kv_value(cpu, 0, b, h, p) + c.head_dim);
                }
        CHECK(written == got.size());
        test::check_close(got, ref, 1e-6f, 1e-6f, what);
    }
};

// The rows of a step: every position of every sequence, shuffled.
void shuffled_rows(std::vector<int>& slots, std::vector<int>& pos, std::mt19937& rng) {
    std::vector<std::pair<int, int>> rows;
    for (int b = 0; b < kBatch; b++)
        for (int p = 0; p < kLengths[b]; p++) rows.emplace_back(b, p);
    std::shuffle(rows.begin(), rows.end(), rng);
    for (const auto& [b, p] : rows) slots.push_back(b), pos.push_back(p);
}

}  // namespace

TEST_CASE("gpu.host.kv_write_index") {
    std::mt19937 rng(37);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const Shape sh : {Shape{6, 2, 8, 3}, Shape{8, 1, 16, 16}, Shape{4, 4, 4, 1}, Shape{8, 8, 64, 64}}) {
        CAPTURE(sh.n_kv_heads);
        CAPTURE(sh.head_dim);
        CAPTURE(sh.block_size);
        const int H = sh.n_heads, Hkv = sh.n_kv_heads, D = sh.head_dim;
        std::vector<int> slots, pos;
        shuffled_rows(slots, pos, rng);
        const int rows = int(slots.size());

        {  // kv_write
            const int stride = Hkv * D + 5;  // a row of k_new and its neighbour's start 5 floats apart
            std::vector<float> k_new(std::size_t(rows) * stride), v_new(k_new.size());
            for (float& x : k_new) x = normal(rng);
            for (float& x : v_new) x = normal(rng);
            KVCache cpu = make_kv_cache(1, kBatch, Hkv, kMaxSeq, D);
            for (int r = 0; r < rows; r++)
                kv_write(cpu, 0, slots[r], pos[r], &k_new[std::size_t(r) * stride], &v_new[std::size_t(r) * stride]);

            Pool pool(sh, rng);
            const gpu::KVLayer& c = pool.c;
            for (long i = 0; i < long(rows) * Hkv * D; i++) {  // kv_write_kernel's loop body
                const gpu::KvWriteElement e = gpu::kv_write_element(i, c.n_kv_heads, c.head_dim);
                const std::size_t dst = c.row(slots[e.r], e.h, pos[e.r]) + e.d;
                c.k[dst] = k_new[e.r * stride + e.j];
                c.v[dst] = v_new[e.r * stride + e.j];
            }
            pool.check_against(cpu, "kv_write walked on the CPU vs pd::kv_write");
        }

        {  // rope_kv_write
            const int stride = (H + 2 * Hkv) * D + 3;  // [q | k | v] and 3 floats more
            std::vector<float> qkv(std::size_t(rows) * stride);
            std::vector<float> cos_t(std::size_t(kMaxSeq) * D / 2), sin_t(cos_t.size());
            for (float& x : qkv) x = normal(rng);
            rope_tables(cos_t.data(), sin_t.data(), kMaxSeq, D, 10000.0f);
            // The CPU: rope on the q heads and the k heads, then the cache write.
            std::vector<float> cpu_qkv = qkv;
            rope(cpu_qkv.data(), rows, stride, H, D, pos.data(), cos_t.data(), sin_t.data());
            rope(cpu_qkv.data() + std::size_t(H) * D, rows, stride, Hkv, D, pos.data(), cos_t.data(), sin_t.data());
            KVCache cpu = make_kv_cache(1, kBatch, Hkv, kMaxSeq, D);
            for (int r = 0; r < rows; r++) {
                const float* row = &cpu_qkv[std::size_t(r) * stride];
                kv_write(cpu, 0, slots[r], pos[r], row + std::size_t(H) * D, row + std::size_t(H + Hkv) * D);
            }

            Pool pool(sh, rng);
            const gpu::KVLayer& c = pool.c;
            const int half = D / 2;
            for (long i = 0; i < long(rows) * (H + Hkv) * half; i++) {  // rope_kv_write_kernel's loop body
                const auto [r, h, j] = gpu::rope_pair(i, H, Hkv, D);
                const int p = pos[r];
                float* x = qkv.data() + r * stride + long(h) * D;
                const float2 rot =
                    gpu::rotate_pair(x[j], x[j + half], cos_t[long(p) * half + j], sin_t[long(p) * half + j]);
                if (h < H) {
                    x[j] = rot.x, x[j + half] = rot.y;
                    continue;
                }
                const float* v = x + long(Hkv) * D;
                const std::size_t dst = c.row(slots[r], h - H, p);
                c.k[dst + j] = rot.x, c.k[dst + j + half] = rot.y;
                c.v[dst + j] = v[j], c.v[dst + j + half] = v[j + half];
            }
            pool.check_against(cpu, "rope_kv_write walked on the CPU vs pd::rope and pd::kv_write");
            // The q heads, rotated in place.
            std::vector<float> got, ref;
            for (int r = 0; r < rows; r++) {
                const std::size_t row = std::size_t(r) * stride;
                got.insert(got.end(), qkv.begin() + row, qkv.begin() + row + std::size_t(H) * D);
                ref.insert(ref.end(), cpu_qkv.begin() + row, cpu_qkv.begin() + row + std::size_t(H) * D);
            }
            test::check_close(got, ref, 1e-6f, 1e-6f, "q heads after rope_kv_write vs pd::rope");
        }
    }
}

#endif  // PDLAB_HAVE_CUDA
