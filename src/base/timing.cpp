#include "base/timing.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace pd {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    double rank = p / 100.0 * double(v.size() - 1);
    std::size_t lo = std::size_t(std::floor(rank)), hi = std::size_t(std::ceil(rank));
    return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

Stats summarize(const std::vector<double>& x) {
    Stats s;
    s.n = int(x.size());
    if (x.empty()) return s;
    double sum = 0;
    for (double v : x) sum += v;
    s.mean = sum / s.n;
    double ss = 0;
    for (double v : x) ss += (v - s.mean) * (v - s.mean);
    s.stdev = s.n > 1 ? std::sqrt(ss / (s.n - 1)) : 0.0;  // sample standard deviation
    s.median = percentile(x, 50);
    s.p90 = percentile(x, 90);
    s.p99 = percentile(x, 99);
    s.min = *std::min_element(x.begin(), x.end());
    s.max = *std::max_element(x.begin(), x.end());
    return s;
}

std::string format_stats(const Stats& s, const char* unit) {
    return fmt::format("median {:.3f} {}, mean {:.3f}, stdev {:.3f}, p90 {:.3f}, n={}", s.median, unit,
                       s.mean, s.stdev, s.p90, s.n);
}

}  // namespace pd
