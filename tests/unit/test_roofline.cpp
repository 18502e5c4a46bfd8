// engine.timing.roofline_*: the per-product accounting lab 10 grades against
// adds up to the phase totals the benchmarks use, and the batch at which
// decode turns compute-bound is where the intensity crosses the ridge.
#include <random>

#include "check.hpp"
#include "measure/roofline.hpp"

using namespace pd;

static Config random_config(std::uint64_t seed) {
    std::mt19937_64 rng(pd::test::seed_for(seed));
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Config c;
    c.family = pick(0, 1) ? Family::llama : Family::gpt2;
    c.n_kv_heads = pick(1, 4);
    c.n_heads = c.n_kv_heads * pick(1, 4);
    c.head_dim = 16 * pick(1, 8);
    c.dim = c.n_heads * c.head_dim;
    c.hidden_dim = 64 * pick(2, 40);
    c.n_layers = pick(1, 24);
    c.vocab_size = pick(100, 50000);
    return c;
}

static void check_sums(const std::vector<ProductCost>& rows, const PhaseCost& total, const char* what) {
    double flops = 0, bytes = 0;
    for (const ProductCost& r : rows) flops += r.flops, bytes += r.bytes;
    INFO(what);
    CHECK(rows.size() == 7);
    CHECK(flops == doctest::Approx(total.flops).epsilon(1e-12));
    CHECK(bytes == doctest::Approx(total.bytes).epsilon(1e-12));
}

TEST_CASE("engine.timing.roofline_products_sum_to_phase_costs") {
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Config c = random_config(seed);
        for (Precision p : {Precision::f32, Precision::bf16, Precision::int8_g64}) {
            check_sums(prefill_products(c, p, int(seed * 37), int(seed % 3) + 1),
                       prefill_cost(c, p, int(seed * 37), int(seed % 3) + 1, {}), "prefill");
            check_sums(decode_products(c, p, int(seed % 5) + 1, seed * 53.5),
                       decode_cost(c, p, int(seed % 5) + 1, seed * 53.5, {}), "decode");
        }
    }
}

TEST_CASE("engine.timing.roofline_products_by_hand") {
    // bench-llama-125m's first rows, counted by hand: qkv is (768 -> 768 + 2 * 256) in 12 layers.
    unsigned long long seed = 0;
    const Config c = synthetic_config("bench-llama-125m", seed);
    const auto d = decode_products(c, Precision::f32, 1, 100);
    CHECK(std::string(d[0].name) == "qkv");
    CHECK(d[0].flops == 2.0 * 768 * 1280 * 12);
    CHECK(d[0].bytes == 4.0 * 768 * 1280 * 12);
    CHECK(std::string(d[1].name) == "attn_scores");
    CHECK(d[1].flops == 2.0 * 12 * 12 * 64 * 100);  // 12 layers x 12 query heads x 64 x 100 positions
    CHECK(d[1].bytes == 4.0 * 100 * 12 * 256);      // K of 100 positions, 4 KV heads of 64, 12 layers
    CHECK(d[6].flops == 2.0 * 768 * 32000);
}

TEST_CASE("engine.timing.roofline_compute_bound_batch") {
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        const Config c = random_config(seed);
        const double context = 10.0 * seed, ridge = 2.0 + seed;
        for (Precision p : {Precision::f32, Precision::bf16, Precision::int8_g64}) {
            const long B = decode_compute_bound_batch(c, p, context, ridge);
            INFO("seed ", seed, " batch ", B);
            if (B == 0) {  // never: the intensity's limit, FLOPs over K/V bytes per sequence, is below it
                const PhaseCost big = decode_cost(c, p, 1 << 30, context, {});
                CHECK(big.intensity < ridge);
            } else {
                CHECK(decode_cost(c, p, int(B), context, {}).intensity >= ridge * (1 - 1e-12));
                if (B > 1) CHECK(decode_cost(c, p, int(B - 1), context, {}).intensity < ridge);
            }
        }
    }
}
