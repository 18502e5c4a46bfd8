// engine.quantize: weight-only int8 and int4 with per-group scales -- the
// reference quantizer's round-trip bound, the decode kernel (and prefill's
// dequantized path) against a double-precision product of the dequantized
// weights, and the bundled model's quality in int8 and int4 against f32.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/isa.hpp"
#include "engine/matmul.hpp"
#include "engine/panel_kernels.hpp"
#include "engine/quantize.hpp"
#include "load/model_source.hpp"
#include "measure/quality.hpp"

using namespace pd;
using namespace pd::test;

namespace {

// y (M, N) = x (M, K) @ w^T + b, summed in double: the oracle for every product here.
std::vector<float> product_double(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b, int M, int K, int N) {
    std::vector<float> y(std::size_t(M) * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = b.empty() ? 0.0 : b[n];
            for (int k = 0; k < K; k++) s += double(x[std::size_t(m) * K + k]) * w[std::size_t(n) * K + k];
            y[std::size_t(m) * N + n] = float(s);
        }
    return y;
}

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

// x (M, K) as the decode kernel sees it: each row rounded to integers in
// [-max_q, max_q] in groups of G (quantize_activations), back in f32.
std::vector<float> round_x_int(const std::vector<float>& x, int M, int K, int G, int max_q) {
    std::vector<float> seen(x.size()), scales(std::size_t((K + G - 1) / G));
    std::vector<std::int16_t> q(static_cast<std::size_t>(K));
    for (int m = 0; m < M; m++) {
        quantize_activations(&x[std::size_t(m) * K], K, G, q.data(), scales.data(), max_q);
        for (int k = 0; k < K; k++) seen[std::size_t(m) * K + k] = float(q[k]) * scales[k / G];
    }
    return seen;
}

// An int8 or int4 Linear's product for each row count in Ms against the
// oracle on what it multiplies: the dequantized weights and, for M <= kSmallM,
// x rounded to int16 per group as the decode kernel takes it (for M > kSmallM,
// both operands rounded to bf16, as prefill runs them). One Linear for all Ms:
// making it (oneDNN's packing) costs more than the products.
void check_quantized_linear(const std::vector<int>& Ms, int K, int N, Precision p, bool with_bias) {
    const int G = group_size(p);
    auto w = randn(std::size_t(N) * K, 41, 0.05f);
    std::vector<float> b = with_bias ? randn(N, 43) : std::vector<float>{};
    const std::vector<float> w_dq = dequantize_rows(quantize_rows(w.data(), N, K, G, quantized_max(p)));
    Linear L = make_linear(w, b, K, N, p);
    for (int M : Ms) {
        const auto x = randn(std::size_t(M) * K, 42);
        std::vector<float> w_seen = w_dq, x_seen = x;
        if (M > kSmallM) {
            for (auto& v : w_seen) v = round_bf16(v);
            for (auto& v : x_seen) v = round_bf16(v);
        } else {
            x_seen = round_x_int(x, M, K, G, x_quantized_max(p));
        }
        std::vector<float> got(std::size_t(M) * N);
        linear_forward(L, x.data(), M, got.data());
        check_close(got, product_double(x_seen, w_seen, b, M, K, N), 1e-4f, 1e-4f,
                    fmt::format("{} linear M={} K={} N={} bias={} ({}): the kernel must multiply x (rounded "
                                "to int16 per group for decode) by q * s of each group exactly as the "
                                "dequantized weights do",
                                precision_name(p), M, K, N, with_bias, linear_impl_name(L, M)));
    }
}

}  // namespace

TEST_CASE("engine.quantize.round_trip_within_half_a_step") {
    // Rows with an all-zero group, one outlier, and a last group shorter than G;
    // int8 (q in [-127, 127]) and int4 (q in [-7, 7]).
    for (int max_q : {kInt8Max, kInt4Max})
    for (int G : {32, 64, 128})
        for (auto [rows, cols] : {std::pair{3, 256}, {5, 100}, {2, 688}, {2, 7}}) {
            auto w = randn(std::size_t(rows) * cols, 51, 0.1f);
            std::fill(w.begin(), w.begin() + std::min(G, cols), 0.0f);
            w.back() = 3.0f;
            const QuantizedMatrix q = quantize_rows(w.data(), rows, cols, G, max_q);
            const auto dq = dequantize_rows(q);
            std::size_t bad = 0;
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) {
                    const std::size_t i = std::size_t(r) * cols + c;
                    const float s = q.scales[std::size_t(r) * q.groups_per_row() + c / G];
                    bad += !(std::fabs(w[i] - dq[i]) <= 0.5f * s * (1 + 1e-5f)) || std::abs(q.q[i]) > max_q;
                }
            INFO(fmt::format("G={} max_q={} ({} x {}): every weight must come back within half its group's "
                             "scale (s = max|w| / {}), q in [-{}, {}]; {} do not",
                             G, max_q, rows, cols, max_q, max_q, max_q, bad));
            CHECK(bad == 0);
            CHECK(q.scales[0] == 0.0f);  // an all-zero group: scale 0, no 0/0
            CHECK(q.q.back() == max_q);  // the group's largest |w| is +-max_q exactly
        }
}

// q = round(w / s) exactly, the formula lab 12 teaches and its "= engine"
// column demands of a student's quantizer: w * (1 / s) differs from w / s in
// the last bit for some w and rounds a near-tie the other way (a million
// weights hold several such; the engine did that until 2026-12-04, and lab 12
// printed "= engine NO" for the solution on bench-llama-125m).
TEST_CASE("engine.quantize.rounds_w_over_s") {
    const int rows = 1024, cols = 1024, G = 64;
    const auto w = randn(std::size_t(rows) * cols, 52, 0.05f);
    std::size_t near_ties = 0;
    for (int max_q : {kInt8Max, kInt4Max}) {
        const QuantizedMatrix q = quantize_rows(w.data(), rows, cols, G, max_q);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < w.size(); i++) {
            const float s = q.scales[i / G];  // cols is a multiple of G: groups run on across rows
            const float r = s > 0 ? std::clamp(std::nearbyint(w[i] / s), -float(max_q), float(max_q)) : 0.0f;
            differ += q.q[i] != std::int8_t(r);
            near_ties += s > 0 && std::nearbyint(w[i] / s) != std::nearbyint(w[i] * (1.0f / s));
        }
        INFO(differ << " of " << w.size() << " weights are not round(w / s) (max_q " << max_q << ")");
        CHECK(differ == 0);
    }
    CHECK(near_ties > 0);  // weights where w * (1 / s) rounds otherwise: without them the test tells nothing
}

TEST_CASE("engine.quantize.activations_within_half_a_step") {
    // x rounded per group, as the decode kernel takes it (int16 levels for
    // int8 weights, int8 levels for int4's): a zero group, a group whose
    // largest |x| is negative, a short last group.
    for (int max_q : {kInt16Max, kInt8Max})
        for (int G : {32, 64, 128})
            for (int n : {7, 100, 688}) {
                auto x = randn(std::size_t(n), 71, 3.0f);
                std::fill(x.begin(), x.begin() + std::min(G, n), 0.0f);
                x.back() = -50.0f;
                std::vector<std::int16_t> q(static_cast<std::size_t>(n));
                std::vector<float> scales(std::size_t((n + G - 1) / G));
                quantize_activations(x.data(), n, G, q.data(), scales.data(), max_q);
                std::size_t bad = 0;
                // In double, so that only the quantizer's own f32 rounding of x / s
                // (a few ulps of x: up to 32767 steps) adds to the half step.
                for (int k = 0; k < n; k++) {
                    const double s = scales[k / G], err = std::fabs(x[k] - double(q[k]) * s);
                    bad += !(err <= 0.5 * s + std::ldexp(std::fabs(x[k]), -21)) || std::abs(q[k]) > max_q;
                }
                INFO(fmt::format("max_q={} G={} n={}: every x must come back within half its group's scale "
                                 "(s = max|x| / max_q), q in [-max_q, max_q]; {} do not", max_q, G, n, bad));
                CHECK(bad == 0);
                if (n > G) CHECK(scales[0] == 0.0f);  // an all-zero group: scale 0, no 0/0
                CHECK(q.back() == -max_q);            // the group's largest |x| is +-max_q exactly
            }
    // A NaN in x must reach the output, as it would in f32.
    std::vector<float> x(64, 1.0f);
    x[5] = std::nanf("");
    std::vector<std::int16_t> q(64);
    float scale = 0;
    quantize_activations(x.data(), 64, 64, q.data(), &scale);
    CHECK(std::isnan(scale));
}

TEST_CASE("engine.quantize.decode_kernel_vs_double_reference") {
    // Every row count of the decode kernel, partial last panels, a last group
    // shorter than G (K = 100, 688; K = 7 odd and shorter than every G), and a
    // matrix above 256 KiB that the threads share; int8 and int4.
    std::vector<int> every_m(kSmallM);
    std::iota(every_m.begin(), every_m.end(), 1);
    for (int G : {32, 64, 128})
        for (Precision p : {int8_precision(G), int4_precision(G)})
            for (auto [K, N] : {std::pair{64, 32}, {100, 33}, {688, 70}, {1024, 300}, {7, 40}})
                check_quantized_linear(every_m, K, N, p, N % 2 == 0);
}

#if defined(__x86_64__)
TEST_CASE("engine.quantize.vnni_kernel_equals_portable_kernel") {
    // The AVX-512 VNNI kernel (vpdpwssd) forms the same int32 sums as the
    // Highway kernel and scales them in the same order, so its products must
    // equal the portable kernel's to the bit, on every row count, short last
    // groups and panels, int8 and int4. On a CPU without VNNI (or under a
    // PDLAB_ISA cap) decode does not use it, and there is nothing to compare.
    if (!use_avx512_vnni()) return;
    for (int G : {32, 64, 128})
        for (Precision p : {int8_precision(G), int4_precision(G)})
            for (auto [K, N] : {std::pair{64, 32}, {100, 33}, {7, 40}, {688, 70}}) {
                const Linear L = make_linear(randn(std::size_t(N) * K, 81, 0.05f), randn(N, 82), K, N, p);
                for (int M = 1; M <= kSmallM; M++) {
                    const auto x = randn(std::size_t(M) * K, 83);
                    const int ldx = L.n_groups() * G;
                    std::vector<std::int16_t> xq(std::size_t(M) * ldx);
                    std::vector<float> scales(std::size_t(M) * L.n_groups());
                    quantize_x_int16(x.data(), M, K, G, x_quantized_max(p), xq.data(), ldx, scales.data());
                    std::vector<float> portable(std::size_t(M) * N), vnni(portable.size());
                    PanelJob j{&L, x.data(), M, portable.data()};
                    j.ldx = ldx, j.x_int16 = xq.data(), j.x_scales = scales.data();
                    const int panels = (N + kPanel - 1) / kPanel;
                    panel_products_quantized(j, 0, panels);
                    j.y = vnni.data();
                    panel_products_avx512_vnni(j, 0, panels);
                    INFO(fmt::format("{} M={} K={} N={}: the VNNI kernel's products must equal the portable "
                                     "kernel's to the bit (same integer sums, same scaling order)",
                                     precision_name(p), M, K, N));
                    CHECK(vnni == portable);
                }
            }
}
#endif

TEST_CASE("engine.quantize.int4_nibbles_signed") {
    // Every int4 value -7..7 in every column of both nibble halves (columns
    // 0-15 low, 16-31 high): weights q/7 with one +-1 per group to fix the
    // scale at 1/7, so each product is exact and a wrong sign extension or
    // swapped half shows as an integer error.
    const int K = 64, N = 32;
    std::vector<float> w(std::size_t(N) * K);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) w[std::size_t(n) * K + k] = k == 0 ? (n % 2 ? -1.0f : 1.0f) : float((n + k) % 15 - 7) / 7;
    Linear L = make_linear(w, {}, K, N, Precision::int4_g64);
    for (int k = 0; k < K; k++) {
        std::vector<float> x(K, 0.0f), y(N);
        x[k] = 1.0f;
        linear_small_m(L, x.data(), 1, y.data());
        for (int n = 0; n < N; n++) {
            INFO(fmt::format("int4 weight (row {}, input {}) came back {}, expected {}: its nibble is packed "
                             "or sign-extended wrongly (columns 0-15 live in the low 4 bits, 16-31 in the high)",
                             n, k, y[n] * 7, w[std::size_t(n) * K + k] * 7));
            CHECK(std::fabs(y[n] - w[std::size_t(n) * K + k]) < 1e-5f);
        }
    }
}

TEST_CASE("engine.quantize.prefill_dequantized_bf16") {
    for (int G : {32, 128})
        for (Precision p : {int8_precision(G), int4_precision(G)}) check_quantized_linear({40}, 200, 70, p, true);
}

TEST_CASE("engine.quantize.arranged_for_decode") {
    // int8 and int4 panels moved into per-thread arenas give the same products.
    const int saved = omp_get_max_threads();
    auto w = randn(std::size_t(300) * 256, 61, 0.1f), x = randn(std::size_t(4) * 256, 62);
    for (Precision p : {Precision::int8_g64, Precision::int4_g32}) {
        Linear a = make_linear(w, {}, 256, 300, p);
        std::vector<float> before(std::size_t(4) * 300), after(before.size());
        linear_small_m(a, x.data(), 4, before.data());
        arrange_for_decode({&a}, 3);
        for (int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            linear_small_m(a, x.data(), 4, after.data());
            INFO(precision_name(p) << ", threads " << threads << ": arranging panels must not change a product");
            CHECK(after == before);
        }
    }
    omp_set_num_threads(saved);
}

TEST_CASE("engine.quantize.bytes_and_bad_group") {
    // 1 byte per weight plus one f32 scale per group of each row.
    CHECK(matrix_bytes(256, 10, Precision::int8_g64) == 256 * 10 + 4 * 10 * 4);
    CHECK(matrix_bytes(100, 10, Precision::int8_g64) == 100 * 10 + 2 * 10 * 4);  // a short last group has a scale too
    CHECK(make_linear(randn(64 * 40, 71), {}, 64, 40, Precision::int8_g32).weight_bytes() == 64 * 40 + 2 * 40 * 4);
    CHECK(parse_precision("int8", 128) == Precision::int8_g128);
    CHECK_THROWS_AS(parse_precision("int8", 48), UserError);  // only 32, 64, 128
    // int4: half a byte per weight (a row's odd last weight takes a whole byte), the same scales.
    CHECK(matrix_bytes(256, 10, Precision::int4_g64) == 128 * 10 + 4 * 10 * 4);
    CHECK(matrix_bytes(7, 10, Precision::int4_g32) == 4 * 10 + 1 * 10 * 4);
    CHECK(make_linear(randn(64 * 40, 71), {}, 64, 40, Precision::int4_g32).weight_bytes() == 32 * 40 + 2 * 40 * 4);
    CHECK(stored_bytes_per_weight(Precision::int4_g64) == 0.5 + 4.0 / 64);
    CHECK(parse_precision("int4", 32) == Precision::int4_g32);
    CHECK_THROWS_AS(parse_precision("int4", 16), UserError);
    CHECK_THROWS_AS(parse_precision("int3"), UserError);
    CHECK_THROWS_AS(check_device(Device::cuda, Precision::int4_g64), UserError);  // no 4-bit GPU kernel
}

namespace {

// The bundled tiny model in `p`, with an engine of `positions` per sequence.
struct TinyRun {
    LoadedModel lm;
    std::unique_ptr<Engine> engine;
    TinyRun(Precision p, int positions) : lm(load_model("tiny", p, false)) {
        engine = make_engine(lm.model, {.device = Device::cpu, .batch = 1, .max_seq = positions});
    }
};

}  // namespace

namespace {

const char* kAgreementPrompts[] = {"Once upon a time", "One day, a little fox", "Lily and Tom went to the park",
                                   "The storm was loud, so", "\"Can you help me?\" asked the"};

}  // namespace

TEST_CASE("engine.quantize.tiny_int8_and_int4_against_f32") {
    // Teacher-forced greedy agreement over a fixed prompt set, and perplexity
    // on the held-out stories (data/models/tiny/heldout.txt, never trained on),
    // at group size 64 (measured: see labs/track3/12-quantization).
    // int8 must pick f32's next token at >= 95% of positions and lose under 2%
    // of perplexity. int4 (the stretch; 15 levels per group, not 255) measured
    // within 0.1% of f32's perplexity and 80-85% agreement; its bounds, 70% and
    // 2%, leave room for another CPU's rounding and still fail a kernel that
    // reads a nibble wrongly (agreement falls to chance, perplexity to many
    // times f32's).
    TinyRun f32(Precision::f32, 512);
    std::vector<std::vector<int>> prompts, texts;
    for (const char* p : kAgreementPrompts) prompts.push_back(f32.lm.tokenizer.encode(p));
    for (const auto& para : read_paragraphs(heldout_text("tiny"))) texts.push_back(f32.lm.tokenizer.encode(para));
    const double ppl32 = perplexity(*f32.engine, texts).perplexity;
    for (auto [p, min_agreement] : {std::pair{Precision::int8_g64, 0.95}, {Precision::int4_g64, 0.70}}) {
        TinyRun q(p, 512);
        const Agreement a = greedy_agreement(*f32.engine, *q.engine, prompts, 48);
        const double ppl = perplexity(*q.engine, texts).perplexity;
        INFO(fmt::format("{}: f32's greedy token at {} of {} positions ({:.1f}%; must be >= {:.0f}%), held-out "
                         "perplexity {:.4f} against f32's {:.4f} ({:+.2f}%; must be within 2%): below these the "
                         "quantized weights (or the kernel's scales) change the model's choices",
                         precision_name(p), a.matched, a.total, 100 * a.rate(), 100 * min_agreement, ppl, ppl32,
                         100 * (ppl / ppl32 - 1)));
        CHECK(a.rate() >= min_agreement);
        CHECK(ppl <= ppl32 * 1.02);
        CHECK(ppl >= ppl32 * 0.98);
    }
}
