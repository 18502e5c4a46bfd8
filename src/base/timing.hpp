// Honest timing: a monotonic clock, and statistics over repeated runs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pd {

// Monotonic wall clock (steady_clock): never jumps with NTP adjustments.
inline double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Stats {
    int n = 0;
    double median = 0, mean = 0, stdev = 0, min = 0, max = 0, p90 = 0, p99 = 0;
};

// Percentile by linear interpolation between order statistics (numpy's default).
double percentile(std::vector<double> v, double p);
Stats summarize(const std::vector<double>& samples);
std::string format_stats(const Stats& s, const char* unit = "ms");

}  // namespace pd
