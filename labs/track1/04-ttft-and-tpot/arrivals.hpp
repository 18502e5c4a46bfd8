// Lab 04: the arrival trace, the kit's side (main.cpp draws it, tests.cpp
// checks it). Poisson arrivals are exponential gaps, drawn once at unit rate
// from the seed so that every rate of the sweep reuses the same draws.
//
// A few dozen exponential gaps rarely average their mean: the 31 gaps of
// seed 1's 32 requests average 0.645 (the first 7: 0.63), so the requests
// came about 1.5 times as fast as the rate the program printed. The draws are
// therefore scaled to average exactly 1: the
// gaps keep their random shape (bursts, quiet spells), and n requests at rate
// r arrive over exactly (n - 1) / r seconds, the rate the output names.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace pd::lab04 {

// n gaps: gaps[0] = 0 (the first request), gaps[1..n-1] exponential with
// their mean scaled to exactly 1.
inline std::vector<double> unit_gaps(std::uint64_t seed, int n) {
    std::mt19937_64 rng(seed);
    std::exponential_distribution<double> unit(1.0);
    std::vector<double> gaps(std::size_t(n > 0 ? n : 0), 0.0);
    double sum = 0;
    for (std::size_t i = 1; i < gaps.size(); i++) sum += gaps[i] = unit(rng);
    if (sum > 0)  // (n - 1) gaps of mean 1
        for (double& g : gaps) g *= double(gaps.size() - 1) / sum;
    return gaps;
}

// Arrival times in ms at `rate` requests/s (inf: all at 0, a burst).
inline std::vector<double> arrivals(const std::vector<double>& unit_gaps, double rate) {
    std::vector<double> a(unit_gaps.size(), 0.0);
    if (std::isinf(rate)) return a;
    for (std::size_t i = 1; i < a.size(); i++) a[i] = a[i - 1] + unit_gaps[i] / rate * 1000.0;
    return a;
}

}  // namespace pd::lab04
