// Lab 02 reference solution.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "sampler.hpp"  // pd::argmax

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

}  // namespace pd::lab02
