// Lab 04 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-3).
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

Goodput goodput(std::span<const Scheduled> scheduled, std::span<const RequestMetrics> metrics, const Slo& slo) {
    (void)scheduled, (void)metrics, (void)slo;
    TODO_EXERCISE(
        "README task 3: reject bad input first; then count the requests that meet every limit that "
        "is set, and divide by the span from the first arrival to the last token, in seconds");
}

}  // namespace pd::lab04
