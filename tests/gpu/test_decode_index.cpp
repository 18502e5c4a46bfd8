// gpu.host.decode_index: split-K decode attention's index math
// (gpu/kernels/decode_index.cuh) run on the CPU the way the split and merge kernels of
// gpu/kernels/attention.cu run it, over a paged layout with a shuffled block table,
// against the CPU engine's attention_decode. Ragged lengths (1 key, a split
// boundary and either side of it, several splits), blocks of 1, 3, 16 and 128
// positions, and MHA, GQA and MQA groupings; the merge's warp of 32 lanes
// over more than 32 splits, in runs of 32. No GPU needed; the kernels'
// launches, memory and speed are what a GPU run has left to test.
#include <doctest/doctest.h>

#ifdef PDLAB_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "decode_index.cuh"
#include "engine/attention.hpp"
#include "engine/kv_cache.hpp"

using namespace pd;

namespace {

struct Shape {
    int n_heads, n_kv_heads, head_dim, block_size;
};

// One split as decode_split_kernel computes it for query head q (D floats):
// its softmax max m and sum l, and the unnormalised sum of values o.
void split_pass(const gpu::KVLayer& c, const std::vector<int>& table, gpu::KeyRange keys, int kv_h, const float* q,
                float* ml, float* o) {
    const int D = c.head_dim;
    const gpu::BlockRange blocks = gpu::blocks_of(keys, c.block_size);
    REQUIRE(blocks.first + blocks.count <= int(table.size()));
    const int* blk = table.data() + blocks.first;  // the kernel's copy of the split's table entries
    std::vector<float> p(keys.n);
    float m = -INFINITY;
    for (int s = 0; s < keys.n; s++) {
        const float* k = c.k + gpu::split_key_offset(c, blk, blocks, kv_h, keys.k0 + s);
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[d] * k[d];
        p[s] = dot / std::sqrt(float(D));
        m = std::max(m, p[s]);
    }
    float l = 0.0f;
    std::fill(o, o + D, 0.0f);
    for (int s = 0; s < keys.n; s++) {
        p[s] = std::exp(p[s] - m);
        l += p[s];
        const float* v = c.v + gpu::split_key_offset(c, blk, blocks, kv_h, keys.k0 + s);
        for (int d = 0; d < D; d++) o[d] += p[s] * v[d];
    }
    ml[0] = m, ml[1] = l;
}

// The merged statistics as decode_merge_kernel's warp finds them: lane j
// takes splits j, j + 32, ..., then a butterfly of combine_stats over the
// lanes. Every lane must end with the same statistics.
gpu::SoftmaxStats warp_merge_stats(const float* ml, int used) {
    const int lanes = 32;
    std::vector<gpu::SoftmaxStats> st(lanes), next(lanes);
    for (int j = 0; j < lanes; j++) st[j] = gpu::merge_split_stats(ml, used, j, lanes);
    for (int o = lanes / 2; o > 0; o /= 2) {
        for (int j = 0; j < lanes; j++) next[j] = gpu::combine_stats(st[j], st[j ^ o]);
        st = next;
    }
    for (int j = 1; j < lanes; j++) {
        CHECK(st[j].m == st[0].m);
        CHECK(st[j].l == st[0].l);
    }
    return st[0];
}

// Element d of the merged output as decode_merge_kernel sums it: run by run
// of 32 splits, each run's weights first.
float warp_merge_value(const float* ml, const float* o, int used, int D, int d, gpu::SoftmaxStats st) {
    const int lanes = 32;
    float acc = 0.0f;
    for (int run = 0; run < used; run += lanes) {
        const int n = std::min(lanes, used - run);
        std::vector<float> weights(n);
        for (int i = 0; i < n; i++) weights[i] = gpu::split_weight(ml, run + i, st);
        acc += gpu::merge_split_value(weights.data(), o + std::size_t(run) * D, n, D, d);
    }
    return acc;
}

}  // namespace

TEST_CASE("gpu.host.decode_index") {
    const int max_seq = 2200;
    std::mt19937 rng(37);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const Shape sh : {Shape{6, 2, 8, 3}, Shape{8, 1, 4, 16}, Shape{4, 4, 12, 1}, Shape{8, 8, 4, 128}}) {
        const int H = sh.n_heads, Hkv = sh.n_kv_heads, D = sh.head_dim, bs = sh.block_size;
        for (const int n_keys : {1, 2, 127, 128, 129, 300, 513, 2049, 2200}) {  // 2049: 33 splits, 2 on lane 0
            CAPTURE(H);
            CAPTURE(Hkv);
            CAPTURE(D);
            CAPTURE(bs);
            CAPTURE(n_keys);
            // The CPU cache and its answer.
            KVCache cpu = make_kv_cache(1, 1, Hkv, max_seq, D);
            std::vector<float> k_new(std::size_t(Hkv) * D), v_new(k_new.size());
            for (int p = 0; p < n_keys; p++) {
                for (float& x : k_new) x = normal(rng);
                for (float& x : v_new) x = normal(rng);
                kv_write(cpu, 0, 0, p, k_new.data(), v_new.data());
            }
            std::vector<float> q(std::size_t(H) * D), ref(q.size());
            for (float& x : q) x = normal(rng);
            const int slot = 0, pos = n_keys - 1;
            attention_decode(ref.data(), q.data(), cpu, 0, &slot, &pos, 1, H);

            // The GPU layout (kv_cache.cuh): blocks of bs positions, heads within a
            // block, the sequence's blocks in shuffled order.
            const int n_blocks = (max_seq + bs - 1) / bs;
            std::vector<int> table(n_blocks);
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), rng);
            std::vector<float> K(std::size_t(n_blocks) * Hkv * bs * D), V(K.size());
            for (int p = 0; p < n_keys; p++)
                for (int h = 0; h < Hkv; h++) {
                    const std::size_t at = ((std::size_t(table[p / bs]) * Hkv + h) * bs + p % bs) * D;
                    std::copy_n(kv_key(cpu, 0, 0, h, p), D, K.begin() + at);
                    std::copy_n(kv_value(cpu, 0, 0, h, p), D, V.begin() + at);
                }
            gpu::KVLayer c;
            c.k = K.data(), c.v = V.data(), c.table = table.data();
            c.batch = 1, c.max_blocks = n_blocks, c.block_size = bs;
            c.n_kv_heads = Hkv, c.max_seq = max_seq, c.head_dim = D;

            const int used = gpu::decode_splits_used(n_keys);
            for (int h = 0; h < H; h++) {
                const int kv_h = gpu::kv_head_of(h, H, Hkv);
                CHECK(kv_h == kv_head_for(h, H, Hkv));
                // Every split of the grid: those in the sequence cover it once, in order.
                std::vector<float> ml(std::size_t(used) * 2), o(std::size_t(used) * D);
                int covered = 0;
                for (int split = 0; split < gpu::decode_splits_used(max_seq); split++) {
                    const gpu::KeyRange keys = gpu::decode_split_keys(split, n_keys);
                    if (keys.n <= 0) {
                        CHECK(split >= used);
                        continue;
                    }
                    REQUIRE(split < used);
                    CHECK(keys.k0 == covered);
                    covered += keys.n;
                    split_pass(c, table, keys, kv_h, q.data() + std::size_t(h) * D, ml.data() + split * 2,
                               o.data() + std::size_t(split) * D);
                }
                CHECK(covered == n_keys);
                const gpu::SoftmaxStats st = warp_merge_stats(ml.data(), used);
                const gpu::SoftmaxStats all = gpu::merge_split_stats(ml.data(), used);
                CHECK(st.m == all.m);
                CHECK(std::fabs(st.l - all.l) <= 1e-5f * all.l);
                for (int d = 0; d < D; d++) {
                    const float got = warp_merge_value(ml.data(), o.data(), used, D, d, st);
                    const float want = ref[std::size_t(h) * D + d];
                    CHECK(std::fabs(got - want) <= 1e-5f + 1e-4f * std::fabs(want));
                }
            }
        }
    }
}

#endif  // PDLAB_HAVE_CUDA
