// Lab 04 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-4).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track1-04
#include "exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "todo_exercise.hpp"

namespace pd::lab04 {

std::vector<Scheduled> schedule_fcfs(std::span<const double> arrival_ms,
                                     std::span<const ServiceTrace> services) {
    (void)arrival_ms, (void)services;
    TODO_EXERCISE(
        "README \"How the queue is simulated\": one server, one clock. Decide the serving order "
        "first (by arrival, ties by index), then walk it keeping the time the server is free; "
        "exercise.hpp says what each Scheduled field holds and what to reject");
}

RequestMetrics request_metrics(double submit_ms, std::span<const double> token_times_ms) {
    (void)submit_ms, (void)token_times_ms;
    TODO_EXERCISE(
        "README \"The four metrics\" gives each definition; exercise.hpp lists the three inputs to "
        "reject and the one-token case");
}

std::vector<double> pooled_itl(std::span<const RequestMetrics> requests) {
    (void)requests;
    TODO_EXERCISE("README task 3: one sample per gap, request order then token order");
}

double e2e_latency(double ttft_ms, double tpot_ms, int output_tokens) {
    (void)ttft_ms, (void)tpot_ms, (void)output_tokens;
    TODO_EXERCISE("README \"The worked example\": how many tokens come after the first?");
}

}  // namespace pd::lab04
