// Lab 05 tests: your batched decode step against B single-sequence engines
// (same logits, same tokens, each cache one position longer), and your fit
// against known coefficients and against the defining property of least
// squares (the residuals are orthogonal to every column).
//   meson test -C build --suite track1-05        (all of them)
//   build/labs/track1/05-length-and-batch/lab05_tests --test-case='lab05.fit.*'
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>

#include "check.hpp"
#include "engine.hpp"
#include "exercise.hpp"
#include "generate.hpp"
#include "model_source.hpp"
#include "sampler.hpp"

using namespace pd;
using namespace pd::lab05;
using namespace pd::test;

namespace {

// Small models: GQA Llama and GPT-2 (MHA), 97-token vocabulary.
const char* kModels[] = {
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64",
    "synthetic:gpt2,dim=64,ffn=256,layers=2,heads=4,vocab=97,ctx=64",
};

std::vector<int> some_tokens(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; i++) t[i] = (i * 37 + seed * 11 + 5) % vocab;
    return t;
}

// Forwards to a real engine and counts what the exercise asks of it.
class CountingEngine final : public Engine {
public:
    explicit CountingEngine(std::unique_ptr<Engine> e) : e_(std::move(e)) {}
    int decode_calls = 0, decode_rows = 0, prefill_calls = 0;

    const Config& config() const override { return e_->config(); }
    Device device() const override { return e_->device(); }
    std::string hardware() const override { return e_->hardware(); }
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        prefill_calls++;
        return e_->prefill(slot, tokens, keep);
    }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        decode_calls++;
        decode_rows += int(tokens.size());
        return e_->decode(slots, tokens);
    }
    int cache_len(int slot) const override { return e_->cache_len(slot); }
    int batch() const override { return e_->batch(); }
    int max_seq() const override { return e_->max_seq(); }
    void reset(int slot) override { e_->reset(slot); }
    double time_ms(const std::function<void()>& work) override { return e_->time_ms(work); }
    std::string timing_method() const override { return e_->timing_method(); }
    const Model& host_model() const override { return e_->host_model(); }

private:
    std::unique_ptr<Engine> e_;
};

// Returns logits chosen by the test, to check the greedy pick row by row.
class FakeEngine final : public Engine {
public:
    FakeEngine(int vocab, std::vector<float> logits) : logits_(std::move(logits)) {
        cfg_.name = "fake";
        cfg_.vocab_size = vocab;
    }
    std::vector<int> seen_slots, seen_tokens;

    const Config& config() const override { return cfg_; }
    Device device() const override { return Device::cpu; }
    std::string hardware() const override { return "fake"; }
    const float* prefill(int, std::span<const int>, Keep) override { return logits_.data(); }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        seen_slots.assign(slots.begin(), slots.end());
        seen_tokens.assign(tokens.begin(), tokens.end());
        return logits_.data();
    }
    int cache_len(int) const override { return 1; }
    int batch() const override { return 8; }
    int max_seq() const override { return 8; }
    void reset(int) override {}
    double time_ms(const std::function<void()>& work) override {
        work();
        return 0;
    }
    std::string timing_method() const override { return "none"; }
    const Model& host_model() const override { return model_; }
    const float* data() const { return logits_.data(); }

private:
    Config cfg_;
    Model model_;
    std::vector<float> logits_;
};

// Residual sums sum e_i * P_i^k for k = 0, 1, 2, relative to the data's size.
void check_normal_equations(std::span<const double> P, std::span<const double> ms, const Fit& f,
                            const std::string& what) {
    for (int k = 0; k < 3; k++) {
        double dot = 0, scale = 0;
        for (std::size_t i = 0; i < P.size(); i++) {
            double col = std::pow(P[i], k);
            dot += (ms[i] - f.at(P[i])) * col;
            scale += std::fabs(ms[i] * col);
        }
        INFO(what << ": at the least-squares optimum the residuals are orthogonal to the column P^"
                  << k << ", but sum(residual * P^" << k << ") = " << dot
                  << ". The coefficients are not the best fit (a wrong normal-equation entry, "
                     "a float accumulator, or a scaling not undone?)");
        CHECK(std::fabs(dot) <= 1e-9 * scale);
    }
}

}  // namespace

// --- batched_decode_step -------------------------------------------------------

TEST_CASE("lab05.batched_decode.matches_single_sequences") {
    for (const char* spec : kModels) {
        INFO("model " << std::string(spec));
        auto lm = load_model(spec, Precision::f32, false);
        const int V = lm.model->config.vocab_size;
        // Three sequences of different lengths, in slots 2, 0 and 3 of a batch of
        // 4 (slot 1 stays empty): the step must follow `slots`, not 0..B-1.
        const std::vector<int> slots = {2, 0, 3};
        const std::vector<std::vector<int>> prompts = {some_tokens(5, V, 1), some_tokens(12, V, 2),
                                                       some_tokens(1, V, 3)};
        const int B = int(slots.size());
        EngineOptions bo;
        bo.batch = 4;
        auto batched = make_engine(lm.model, bo);
        std::vector<std::unique_ptr<Engine>> single;
        std::vector<int> tokens(B), single_tok(B);
        for (int r = 0; r < B; r++) {
            const float* lg = batched->prefill(slots[r], prompts[r]);
            tokens[r] = argmax(lg, V);
            single.push_back(make_engine(lm.model, {}));
            single_tok[r] = argmax(single[r]->prefill(0, prompts[r]), V);
            REQUIRE(single_tok[r] == tokens[r]);
        }
        for (int step = 1; step <= 4; step++) {
            std::vector<int> before(B);
            for (int r = 0; r < B; r++) before[r] = batched->cache_len(slots[r]);
            const float* lg = batched_decode_step(*batched, slots, tokens);
            REQUIRE(lg != nullptr);
            std::vector<float> got(lg, lg + std::size_t(B) * V);  // copy before the engine reuses it
            for (int r = 0; r < B; r++) {
                int slot0 = 0;
                const float* ref = single[r]->decode({&slot0, 1}, {&single_tok[r], 1});
                std::vector<float> want(ref, ref + V);
                single_tok[r] = argmax(want.data(), V);
                std::string what = fmt::format(
                    "step {}, row {} (slot {}, prompt of {} tokens): the batched logits must equal "
                    "a lone decode of that sequence; a mismatch means the step did not feed each "
                    "sequence its own token, or row r is not slots[r]'s",
                    step, r, slots[r], prompts[r].size());
                check_close(got.data() + std::size_t(r) * V, want.data(), V, 1e-5f, 1e-5f, what);
                CHECK_MESSAGE(tokens[r] == single_tok[r],
                              "step " << step << ", row " << r << ": greedy picks the largest logit of "
                              "ITS row (logits + r * vocab), the first one on ties");
                CHECK_MESSAGE(batched->cache_len(slots[r]) == before[r] + 1,
                              "every sequence in the step gains exactly one cache position");
                CHECK(batched->cache_len(slots[r]) == int(prompts[r].size()) + step);
            }
            CHECK(batched->cache_len(1) == 0);
            tokens = single_tok;  // the next step starts from the same tokens on both sides
        }
    }
}

TEST_CASE("lab05.batched_decode.one_engine_call_for_all_rows") {
    auto lm = load_model(kModels[0], Precision::f32, false);
    const int V = lm.model->config.vocab_size;
    EngineOptions bo;
    bo.batch = 3;
    CountingEngine e(make_engine(lm.model, bo));
    std::vector<int> slots = {0, 1, 2}, tokens(3);
    for (int b = 0; b < 3; b++) tokens[b] = argmax(e.prefill(b, some_tokens(3 + b, V, b), Keep::last), V);
    e.prefill_calls = 0;
    batched_decode_step(e, slots, tokens);
    {
        INFO("batching means ONE forward pass with B rows: the weights are streamed from memory "
             "once for all sequences. Calling decode once per sequence gives the same tokens but "
             "reads every weight B times, which is exactly the cost batching removes");
        CHECK(e.decode_calls == 1);
        CHECK(e.decode_rows == 3);
    }
    CHECK_MESSAGE(e.prefill_calls == 0, "a decode step must not re-run prefill");
}

TEST_CASE("lab05.batched_decode.greedy_per_row") {
    const int V = 6;
    std::vector<float> logits = {
        0, 5, 1, 5, 2, -1,           // row 0: a tie between ids 1 and 3 -> the first, 1
        -3, -2, -1, -4, -1.5f, -9,   // row 1: all negative -> id 2 (a max started at 0 finds none)
        1, 1, 1, 1, 1, 1,            // row 2: all equal -> id 0
    };
    FakeEngine e(V, logits);
    std::vector<int> slots = {4, 1, 6}, tokens = {7, 8, 9};
    const float* got = batched_decode_step(e, slots, tokens);
    {
        INFO("the step must consume the tokens it is given, for the slots it is given");
        CHECK(e.seen_slots == slots);
        CHECK(e.seen_tokens == std::vector<int>{7, 8, 9});
    }
    const std::vector<int> want = {1, 2, 0};
    CHECK_MESSAGE(tokens == want,
                  "tokens[r] = argmax of row r = logits[r * vocab .. r * vocab + vocab), first index "
                  "on ties; expected 1, 2, 0 and got " << tokens[0] << ", " << tokens[1] << ", " << tokens[2]);
    CHECK_MESSAGE(got == e.data(), "return the logits the engine gave you (no copy needed)");
}

TEST_CASE("lab05.batched_decode.generation_matches_generate") {
    // Greedy generation of two sequences by batched steps equals pd::generate
    // run on each one alone.
    auto lm = load_model(kModels[0], Precision::f32, false);
    const int V = lm.model->config.vocab_size, n = 8;
    std::vector<std::vector<int>> prompts = {some_tokens(4, V, 7), some_tokens(9, V, 8)};
    EngineOptions bo;
    bo.batch = 2;
    auto e = make_engine(lm.model, bo);
    std::vector<int> slots = {0, 1}, tokens(2);
    std::vector<std::vector<int>> out(2);
    for (int b = 0; b < 2; b++) {
        tokens[b] = argmax(e->prefill(b, prompts[b]), V);
        out[b].push_back(tokens[b]);
    }
    for (int step = 1; step < n; step++) {
        batched_decode_step(*e, slots, tokens);
        for (int b = 0; b < 2; b++) out[b].push_back(tokens[b]);
    }
    for (int b = 0; b < 2; b++) {
        auto solo = make_engine(lm.model, {});
        GenerateOptions g;
        g.max_new_tokens = n;
        g.stop_at_eos = false;
        GenerateResult r = generate(*solo, prompts[b], g);
        INFO("sequence " << b << ": generated together with another sequence, it must produce the "
                            "same greedy tokens as alone");
        CHECK(out[b] == r.generated_ids);
    }
}

// --- fit_linear_quadratic ------------------------------------------------------

TEST_CASE("lab05.fit.exact_quadratic") {
    // time = 1.5 + 0.02 P + 3e-5 P^2 ms, measured at prompt lengths 16 .. 1024.
    std::vector<double> P = {16, 32, 64, 128, 256, 512, 1024}, ms;
    for (double p : P) ms.push_back(1.5 + 0.02 * p + 3e-5 * p * p);
    Fit f = fit_linear_quadratic(P, ms);
    INFO("exact data: the fit must give back c0 = 1.5, a = 0.02, b = 3e-5; got c0 = " << f.c0 << ", a = "
         << f.a << ", b = " << f.b);
    CHECK(f.c0 == doctest::Approx(1.5).epsilon(1e-8));
    CHECK(f.a == doctest::Approx(0.02).epsilon(1e-8));
    CHECK(f.b == doctest::Approx(3e-5).epsilon(1e-8));
    CHECK(f.r2 == doctest::Approx(1.0).epsilon(1e-9));
    CHECK(f.at(100) == doctest::Approx(1.5 + 2.0 + 0.3));
}

TEST_CASE("lab05.fit.long_prompts_keep_their_digits") {
    // P up to 32768: the entries of the normal equations reach P^4 ~ 1e18.
    std::vector<double> P, ms;
    for (double p = 512; p <= 32768; p *= 2) {
        P.push_back(p);
        ms.push_back(4.0 + 0.05 * p + 1e-6 * p * p);
    }
    Fit f = fit_linear_quadratic(P, ms);
    INFO("got c0 = " << f.c0 << ", a = " << f.a << ", b = " << f.b
         << "; expected 4, 0.05, 1e-6. With long prompts the entries of A^T A span ~18 orders of "
            "magnitude: accumulate in double (a float keeps 7 digits), and prefer scaled lengths "
            "(x = P / max P, then a = a_x / s, b = b_x / s^2) so the system stays well conditioned");
    CHECK(f.a == doctest::Approx(0.05).epsilon(1e-6));
    CHECK(f.b == doctest::Approx(1e-6).epsilon(1e-6));
    CHECK(f.c0 == doctest::Approx(4.0).epsilon(1e-4));
    check_normal_equations(P, ms, f, "long prompts");
}

TEST_CASE("lab05.fit.linear_data_has_no_quadratic_term") {
    // Decode total time against output length: a straight line.
    std::vector<double> N = {1, 8, 16, 32, 64, 128}, ms;
    for (double n : N) ms.push_back(3.0 + 0.8 * (n - 1));
    Fit f = fit_linear_quadratic(N, ms);
    CHECK(f.a == doctest::Approx(0.8).epsilon(1e-8));
    INFO("b must come out 0 (to rounding) when the data is a straight line; got " << f.b);
    CHECK(std::fabs(f.b) < 1e-10);
    CHECK(f.c0 == doctest::Approx(2.2).epsilon(1e-8));
}

TEST_CASE("lab05.fit.noisy_is_least_squares") {
    std::mt19937_64 rng(55);
    std::normal_distribution<double> noise(0.0, 0.02);  // 2% measurement noise
    for (int trial = 0; trial < 20; trial++) {
        std::vector<double> P, ms;
        const double c0 = 0.5 + trial * 0.1, a = 0.01 + 0.001 * trial, b = 2e-5;
        for (int i = 0; i < 10 + trial; i++) {
            double p = 16.0 * (1 + (rng() % 64));
            P.push_back(p);
            ms.push_back((c0 + a * p + b * p * p) * (1.0 + noise(rng)));
        }
        if (std::set<double>(P.begin(), P.end()).size() < 3) continue;
        Fit f = fit_linear_quadratic(P, ms);
        INFO("trial " << trial << " with " << P.size() << " noisy points");
        check_normal_equations(P, ms, f, fmt::format("trial {}", trial));
        // r2 from its definition.
        double mean = 0, ss_res = 0, ss_tot = 0;
        for (double y : ms) mean += y;
        mean /= double(ms.size());
        for (std::size_t i = 0; i < P.size(); i++)
            ss_res += std::pow(ms[i] - f.at(P[i]), 2), ss_tot += std::pow(ms[i] - mean, 2);
        CHECK_MESSAGE(f.r2 == doctest::Approx(1.0 - ss_res / ss_tot).epsilon(1e-9),
                      "r2 = 1 - SS_res / SS_tot, with SS_res = sum (ms - fit)^2 and SS_tot = "
                      "sum (ms - mean)^2");
        CHECK(f.r2 <= 1.0);
        // The order of the points does not matter.
        std::vector<std::size_t> idx(P.size());
        for (std::size_t i = 0; i < idx.size(); i++) idx[i] = i;
        std::shuffle(idx.begin(), idx.end(), rng);
        std::vector<double> P2, ms2;
        for (auto i : idx) P2.push_back(P[i]), ms2.push_back(ms[i]);
        Fit g = fit_linear_quadratic(P2, ms2);
        CHECK(g.b == doctest::Approx(f.b).epsilon(1e-6));
        CHECK(g.a == doctest::Approx(f.a).epsilon(1e-6));
    }
}

TEST_CASE("lab05.fit.bad_input_throws") {
    std::vector<double> three = {1, 2, 3}, two = {1, 2};
    CHECK_THROWS_AS_MESSAGE(fit_linear_quadratic(three, two), std::invalid_argument,
                            "the lengths and the times must pair up one to one");
    CHECK_THROWS_AS_MESSAGE(fit_linear_quadratic(two, two), std::invalid_argument,
                            "three unknowns (c0, a, b) need at least three points");
    std::vector<double> P = {64, 64, 128, 128, 64}, ms = {1, 1.1, 2, 2.1, 0.9};
    CHECK_THROWS_AS_MESSAGE(fit_linear_quadratic(P, ms), std::invalid_argument,
                            "five measurements at only two distinct lengths still pin down just two "
                            "unknowns: the system is singular, throw instead of returning inf or NaN");
    CHECK_THROWS_AS(fit_linear_quadratic(std::span<const double>{}, std::span<const double>{}),
                    std::invalid_argument);
}
