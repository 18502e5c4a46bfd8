// Lab 02 reference solution: the measurement harness.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "engine/sampler.hpp"  // pd::argmax

namespace pd::lab02 {

std::vector<int> decode_loop(Engine& engine, int slot, int first_token, int steps, std::vector<double>& step_ms) {
    if (steps < 0) fail("the number of decode steps must be >= 0, got {}", steps);
    step_ms.clear();
    std::vector<int> out;
    out.reserve(std::size_t(steps));
    const int V = engine.config().vocab_size;
    int token = first_token;
    for (int i = 0; i < steps; i++) {
        const float* logits = nullptr;
        // Only the model's work is timed; choosing the token is not part of the step.
        step_ms.push_back(engine.time_ms([&] { logits = engine.decode({&slot, 1}, {&token, 1}); }));
        token = argmax(logits, V);
        out.push_back(token);
    }
    return out;
}

RunTimes time_one_run(Engine& engine, int slot, std::span<const int> prompt, int steps) {
    if (prompt.empty()) fail("a run needs at least one prompt token");
    if (steps < 0) fail("the number of decode steps must be >= 0, got {}", steps);
    engine.reset(slot);  // every run starts from an empty cache, or run 2 would extend run 1's sequence
    RunTimes run;
    const float* logits = nullptr;
    run.prefill_ms = engine.time_ms([&] { logits = engine.prefill(slot, prompt); });
    const int g1 = argmax(logits, engine.config().vocab_size);
    run.tokens = decode_loop(engine, slot, g1, steps, run.step_ms);
    run.tokens.insert(run.tokens.begin(), g1);
    return run;
}

Measurement measure(Engine& engine, int slot, std::span<const int> prompt, const Recipe& recipe) {
    if (recipe.warmup < 0) fail("warm-up runs must be >= 0, got {}", recipe.warmup);
    if (recipe.repeats < 1) fail("at least one measured run is needed, got {}", recipe.repeats);
    Measurement m;
    std::vector<int> first_tokens;
    for (int i = 0; i < recipe.warmup + recipe.repeats; i++) {
        RunTimes run = time_one_run(engine, slot, prompt, recipe.steps);
        if (i == 0) first_tokens = run.tokens;
        m.same_tokens = m.same_tokens && run.tokens == first_tokens;
        if (i >= recipe.warmup) m.runs.push_back(std::move(run));  // warm-ups paid the one-time costs
    }
    return m;
}

namespace {

// numpy.percentile's default: linear interpolation between order statistics.
double interpolate(const std::vector<double>& sorted, double p) {
    const double rank = p / 100.0 * double(sorted.size() - 1);
    const std::size_t lo = std::size_t(std::floor(rank)), hi = std::size_t(std::ceil(rank));
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

}  // namespace

Stats stats_of(std::span<const double> samples) {
    if (samples.empty()) fail("no timing samples to summarise (did the loop run zero times?)");
    std::vector<double> s(samples.begin(), samples.end());
    std::sort(s.begin(), s.end());
    Stats st;
    st.n = int(s.size());
    double sum = 0;
    for (double v : s) sum += v;
    st.mean = sum / st.n;
    double ss = 0;
    for (double v : s) ss += (v - st.mean) * (v - st.mean);
    st.stdev = st.n > 1 ? std::sqrt(ss / (st.n - 1)) : 0.0;
    st.min = s.front();
    st.max = s.back();
    st.median = interpolate(s, 50);
    st.p90 = interpolate(s, 90);
    st.p99 = interpolate(s, 99);
    return st;
}


std::vector<Stats> per_step_series(const Measurement& m) {
    if (m.runs.empty()) fail("no measured runs to summarise");
    const std::size_t steps = m.runs.front().step_ms.size();
    std::vector<Stats> series;
    std::vector<double> one_step;  // (runs) the times of one step index
    for (std::size_t i = 0; i < steps; i++) {
        one_step.clear();
        for (const RunTimes& run : m.runs) {
            if (run.step_ms.size() != steps)
                fail("runs with {} and {} decode steps cannot be summarised step by step", steps, run.step_ms.size());
            one_step.push_back(run.step_ms[i]);
        }
        series.push_back(stats_of(one_step));
    }
    return series;
}

}  // namespace pd::lab02
