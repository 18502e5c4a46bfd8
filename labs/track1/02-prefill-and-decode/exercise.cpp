// Lab 02 starter: replace each TODO_EXERCISE with your implementation.
// The declarations, with the rules each function follows, are in exercise.hpp.
#include "exercise.hpp"

#include <algorithm>
#include <cmath>

#include "todo_exercise.hpp"  // TODO_EXERCISE and pd::lab::NotImplemented
#include "sampler.hpp"                 // pd::argmax

namespace pd::lab02 {

std::vector<int> decode_loop(Engine& engine, int slot, int first_token, int steps, std::vector<double>& step_ms) {
    (void)engine, (void)slot, (void)first_token, (void)steps, (void)step_ms;
    TODO_EXERCISE("clear step_ms; then `steps` times: time engine.decode({&slot, 1}, {&token, 1}) with "
                  "engine.time_ms([&] { ... }), push the ms, pick the next token with pd::argmax over the "
                  "returned logits (engine.config().vocab_size of them) and feed it next time");
}

Stats stats_of(std::span<const double> samples) {
    (void)samples;
    TODO_EXERCISE("sort a copy of the samples; mean, SAMPLE stdev (divide by n - 1; 0 for one sample), "
                  "min, max, and median/p90/p99 by linear interpolation at rank p/100 * (n - 1)");
}

}  // namespace pd::lab02
