// Lab 10 tests: your counts against the engine's own accounting
// (src/measure/roofline.hpp: prefill_products, decode_products,
// decode_compute_bound_batch), on model shapes drawn from PDLAB_TEST_SEED:
// family, layers, heads and KV heads, head_dim, hidden size, vocabulary,
// precision, batch, prompt and cache lengths.
//   meson test -C build --suite track3-10        (all of them)
//   build/labs/track3/10-roofline/lab10_tests --test-case='lab10.phase.*'
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "exercise.hpp"
#include "lab_test.hpp"
#include "measure/roofline.hpp"  // the engine's accounting: the reference

using namespace pd;
using namespace pd::lab10;
using pd::lab::Inputs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)

namespace {

// Counts are sums of products of integers below 2^53: exact in doubles up to
// the order of summation. A relative 1e-9 forgives that and nothing else.
constexpr pd::lab::Tolerance kTol{0, 1e-9};

bool close(double got, double want) { return std::fabs(got - want) <= 1e-9 * std::fabs(want); }

// A model shape: either family, MHA, GQA or MQA, sizes from tiny to a 1B Llama's.
Config random_config(Inputs& in) {
    Config c;
    c.family = in.integer(0, 1) ? Family::llama : Family::gpt2;
    c.n_kv_heads = in.integer(1, 8);
    c.n_heads = c.n_kv_heads * in.integer(1, 4);
    c.head_dim = 16 * in.integer(1, 8);
    c.dim = c.n_heads * c.head_dim + 16 * in.integer(0, 4);  // dim need not be n_heads * head_dim
    c.hidden_dim = 32 * in.integer(2, 256);
    c.n_layers = in.integer(1, 32);
    c.vocab_size = in.integer(50, 130000);
    return c;
}

std::string describe(const Config& c) {
    return fmt::format("{} model: {} layers, dim {}, {} heads / {} KV heads of {}, hidden {}, vocab {}",
                       family_name(c.family), c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim,
                       c.hidden_dim, c.vocab_size);
}

// What a wrong count usually means, from the ratio got / expected.
std::string diagnose(const std::string& name, const char* what, double got, double want, const PhaseShape& s) {
    const double r = want != 0 ? got / want : 0;
    auto near = [&](double x) { return x > 0 && std::fabs(r / x - 1) < 1e-6; };
    if (near(s.batch) && s.batch > 1) return "a factor of the batch too many: is something shared by the batch counted per sequence?";
    if (s.batch > 1 && near(1.0 / s.batch)) return "a factor of the batch too few: each sequence has its own rows (and K/V)";
    if (near(2) || near(0.5)) return "a factor of 2 off: a multiply-add is 2 FLOPs; K and V are two tensors; Llama's mlp_in is gate and up";
    if (near(4) || near(0.25)) return "a factor of 4 off: K/V are f32 (4 bytes) whatever the weights' precision";
    if (s.phase == Phase::prefill && near(double(s.prompt_len)))
        return "a factor of P too many: the head sees only the last position; weights are read once per pass";
    return fmt::format("{} of {} is {:.6g} times the engine's", what, name, r);
}

// Your seven rows against the engine's, name by name.
void check_rows(const std::vector<Count>& got, const std::vector<ProductCost>& want, const PhaseShape& s,
                const std::string& setting) {
    INFO(setting);
    REQUIRE_MESSAGE(got.size() == want.size(), "count_phase returned " << got.size() << " rows; exercise.hpp lists 7");
    for (std::size_t i = 0; i < want.size(); i++) {
        CHECK_MESSAGE(got[i].name == want[i].name, "row " << i << " is \"" << got[i].name << "\", expected \"" << want[i].name << "\"");
        observe(fmt::format("{} flops", want[i].name), got[i].flops, kTol);
        observe(fmt::format("{} bytes", want[i].name), got[i].bytes, kTol);
        CHECK_MESSAGE(close(got[i].flops, want[i].flops), want[i].name << " FLOPs: got " << got[i].flops << ", expected " << want[i].flops << ": " << diagnose(want[i].name, "FLOPs", got[i].flops, want[i].flops, s));
        CHECK_MESSAGE(close(got[i].bytes, want[i].bytes), want[i].name << " bytes: got " << got[i].bytes << ", expected " << want[i].bytes << ": " << diagnose(want[i].name, "bytes", got[i].bytes, want[i].bytes, s));
    }
}

Precision random_precision(Inputs& in) { return in.integer(0, 1) ? Precision::bf16 : Precision::f32; }

}  // namespace

// --- Task 1: one product ------------------------------------------------------------

TEST_CASE("lab10.matmul.counts") {
    pd::lab::needs([] { count_matmul("x", 1, 1, 1, Precision::f32); });
    Inputs in(1001);
    for (int t = 0; t < 20; t++) {
        const double rows = in.integer(1, 4096);
        const int K = in.integer(1, 9000), N = in.integer(1, 9000);
        const Precision p = random_precision(in);
        const Count c = count_matmul("w", rows, K, N, p);
        INFO(fmt::format("({}, {}) x ({}, {})^T, {} weights", rows, K, N, K, precision_name(p)));
        observe("flops", c.flops, kTol);
        observe("bytes", c.bytes, kTol);
        CHECK(c.name == "w");
        CHECK_MESSAGE(close(c.flops, 2.0 * rows * K * N), "FLOPs: one multiply and one add per (row, in, out) triple");
        CHECK_MESSAGE(close(c.bytes, double(K) * N * bytes_per_weight(p)),
                      "bytes: the weight matrix once at " << bytes_per_weight(p) << " bytes per weight, whatever the rows (activations are not counted)");
    }
}

TEST_CASE("lab10.matmul.rejects_empty_shapes") {
    pd::lab::needs([] { count_matmul("x", 1, 1, 1, Precision::f32); });
    CHECK_THROWS_AS(count_matmul("x", 0, 4, 4, Precision::f32), std::invalid_argument);
    CHECK_THROWS_AS(count_matmul("x", 1, 0, 4, Precision::f32), std::invalid_argument);
    CHECK_THROWS_AS(count_matmul("x", 1, 4, -1, Precision::bf16), std::invalid_argument);
}

// --- Task 2: a whole pass -------------------------------------------------------------

TEST_CASE("lab10.phase.decode_against_the_engine") {
    pd::lab::needs([] { count_phase(Config{}, {Phase::decode, Precision::f32, 1, 0, 1}); });
    Inputs in(1002);
    for (int t = 0; t < 12; t++) {
        const Config c = random_config(in);
        const PhaseShape s{Phase::decode, random_precision(in), in.integer(1, 64), 0, in.integer(1, 8000) + 0.5 * in.integer(0, 1)};
        check_rows(count_phase(c, s), decode_products(c, s.precision, s.batch, s.context), s,
                   fmt::format("decode step, batch {}, context {}, {}; {}", s.batch, s.context, precision_name(s.precision), describe(c)));
    }
}

TEST_CASE("lab10.phase.prefill_against_the_engine") {
    pd::lab::needs([] { count_phase(Config{}, {Phase::prefill, Precision::f32, 1, 1, 0}); });
    Inputs in(1003);
    for (int t = 0; t < 12; t++) {
        const Config c = random_config(in);
        const PhaseShape s{Phase::prefill, random_precision(in), in.integer(1, 8), in.integer(1, 4096), 0};
        check_rows(count_phase(c, s), prefill_products(c, s.precision, s.prompt_len, s.batch), s,
                   fmt::format("prefill, batch {}, prompt {}, {}; {}", s.batch, s.prompt_len, precision_name(s.precision), describe(c)));
    }
}

TEST_CASE("lab10.phase.totals_match_the_phase_costs") {
    // The sum of your rows is what the lab program places on the roofline.
    pd::lab::needs([] { count_phase(Config{}, {Phase::decode, Precision::f32, 1, 0, 1}); });
    Inputs in(1004);
    const Config c = random_config(in);
    const int B = in.integer(1, 32), P = in.integer(1, 2048);
    double flops = 0, bytes = 0;
    for (const Count& r : count_phase(c, {Phase::prefill, Precision::f32, B, P, 0})) flops += r.flops, bytes += r.bytes;
    const PhaseCost want = prefill_cost(c, Precision::f32, P, B, {});
    observe("prefill flops", flops, kTol);
    observe("prefill bytes", bytes, kTol);
    INFO(describe(c), ", batch ", B, ", prompt ", P);
    CHECK_MESSAGE(close(flops, want.flops), "prefill FLOPs " << flops << " vs the engine's " << want.flops);
    CHECK_MESSAGE(close(bytes, want.bytes), "prefill bytes " << bytes << " vs the engine's " << want.bytes);
}

TEST_CASE("lab10.phase.rejects_bad_shapes") {
    pd::lab::needs([] { count_phase(Config{}, {Phase::decode, Precision::f32, 1, 0, 1}); });
    const Config c;
    CHECK_THROWS_AS(count_phase(c, {Phase::decode, Precision::f32, 0, 0, 5}), std::invalid_argument);
    CHECK_THROWS_AS(count_phase(c, {Phase::decode, Precision::f32, 1, 0, 0}), std::invalid_argument);
    CHECK_THROWS_AS(count_phase(c, {Phase::prefill, Precision::f32, 1, 0, 0}), std::invalid_argument);
}

// --- Task 3: the roofline ---------------------------------------------------------------

TEST_CASE("lab10.roofline.two_roofs") {
    pd::lab::needs([] { attainable_gflops(1, 1, 1); });
    Inputs in(1005);
    for (int t = 0; t < 20; t++) {
        const double peak = in.uniform(10, 5000), bw = in.uniform(5, 500);
        const double ridge = peak / bw, I = ridge * in.uniform(0.01, 100);
        const double got = attainable_gflops(I, peak, bw);
        observe("attainable", got, {0, 1e-12});
        INFO(fmt::format("peak {:.1f} GFLOP/s, {:.1f} GB/s, intensity {:.3f} (ridge {:.3f})", peak, bw, I, ridge));
        CHECK_MESSAGE(got == doctest::Approx(std::min(peak, bw * I)).epsilon(1e-12),
                      (I < ridge ? "left of the ridge the memory roof binds: GB/s x FLOP/byte = GFLOP/s"
                                 : "right of the ridge the compute roof binds: nothing goes faster than the peak"));
    }
    CHECK(attainable_gflops(0, 100, 10) == 0);
    CHECK_THROWS_AS(attainable_gflops(-1, 100, 10), std::invalid_argument);
    CHECK_THROWS_AS(attainable_gflops(1, 0, 10), std::invalid_argument);
    CHECK_THROWS_AS(attainable_gflops(1, 100, 0), std::invalid_argument);
}

// --- Task 4: when batching stops being free -------------------------------------------------

TEST_CASE("lab10.batch.against_the_engine") {
    pd::lab::needs([] { compute_bound_batch(Config{}, Precision::f32, 1, 1); });
    Inputs in(1006);
    int never = 0;
    for (int t = 0; t < 30; t++) {
        const Config c = random_config(in);
        const Precision p = random_precision(in);
        // Short caches mostly: at long ones almost no model ever turns compute-bound.
        const double context = in.integer(1, t % 3 == 0 ? 16000 : 512), ridge = in.uniform(1, 40);
        const long got = compute_bound_batch(c, p, context, ridge);
        const long want = decode_compute_bound_batch(c, p, context, ridge);
        never += want == 0;
        observe("batch", double(got), {1, 0});  // one either side: rounding at an exact crossing
        INFO(fmt::format("context {}, ridge {:.3f} FLOP/byte, {}; {}", context, ridge, precision_name(p), describe(c)));
        if (want == 0) {
            CHECK_MESSAGE(got == 0, "got " << got << ": at this context each sequence's K/V bytes grow as fast as its FLOPs "
                                    "and the intensity levels off below the ridge: no batch reaches it (return 0)");
        } else {
            CHECK_MESSAGE(std::labs(got - want) <= 1, "got " << got << ", expected " << want
                          << ": the smallest B with B f / (W + B k) >= ridge, W the weights' bytes, f and k one sequence's FLOPs and K/V bytes");
        }
    }
    MESSAGE(never, " of 30 cases never turn compute-bound");
}

TEST_CASE("lab10.batch.rejects_bad_input") {
    pd::lab::needs([] { compute_bound_batch(Config{}, Precision::f32, 1, 1); });
    CHECK_THROWS_AS(compute_bound_batch(Config{}, Precision::f32, 0, 10), std::invalid_argument);
    CHECK_THROWS_AS(compute_bound_batch(Config{}, Precision::f32, 10, 0), std::invalid_argument);
}

// --- the seed ----------------------------------------------------------------------------

TEST_CASE("lab10.seed.another_seed_gives_other_inputs") {
    // A grader runs these tests under a PDLAB_TEST_SEED nobody has seen.
    Inputs a(1002), b(1002, pd::lab::env_test_seed() + 1);
    const Config ca = random_config(a), cb = random_config(b);
    CHECK_MESSAGE(describe(ca) != describe(cb), "two seeds gave the same model shape");
}
