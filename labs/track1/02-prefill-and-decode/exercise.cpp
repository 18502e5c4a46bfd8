// Lab 02 starter: replace each TODO_EXERCISE with your implementation, in task
// order (the lab program stops at the first one still missing).
// The declarations, with the rules each function follows, are in exercise.hpp;
// the handout's "What you may use" box says which engine calls are allowed.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "engine/sampler.hpp"        // pd::argmax (you wrote its twin in lab 01)
#include "todo_exercise.hpp"  // TODO_EXERCISE and pd::lab::NotImplemented

namespace pd::lab02 {

std::vector<int> decode_loop(Engine& engine, int slot, int first_token, int steps, std::vector<double>& step_ms) {
    (void)engine, (void)slot, (void)first_token, (void)steps, (void)step_ms;
    TODO_EXERCISE("handout task 2 and the trace table (Step 2, decode step 1); engine.hpp says what decode takes "
                  "(spans of slots and tokens, [B] each) and what time_ms measures");
}

RunTimes time_one_run(Engine& engine, int slot, std::span<const int> prompt, int steps) {
    (void)engine, (void)slot, (void)prompt, (void)steps;
    TODO_EXERCISE("handout task 3 and the trace table (Step 1, prefill); exercise.hpp's RunTimes gives the "
                  "shapes; think about what the cache holds when a run starts");
}

Measurement measure(Engine& engine, int slot, std::span<const int> prompt, const Recipe& recipe) {
    (void)engine, (void)slot, (void)prompt, (void)recipe;
    TODO_EXERCISE("handout section \"Measuring them honestly\", the warm-up and repeats rows; "
                  "Measurement in exercise.hpp says which runs are kept");
}

Stats stats_of(std::span<const double> samples) {
    (void)samples;
    TODO_EXERCISE("handout task 5; exercise.hpp defines every field (sample stdev, interpolated percentiles)");
}

std::vector<Stats> per_step_series(const Measurement& m) {
    (void)m;
    TODO_EXERCISE("handout task 6 and question 3: one Stats per step index, over the kept runs");
}

}  // namespace pd::lab02
