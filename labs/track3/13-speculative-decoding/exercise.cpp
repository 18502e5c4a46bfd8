// Lab 13 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-3).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track3-13
#include "exercise.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "todo_exercise.hpp"

namespace pd::lab13 {

Verdict accept_greedy(const Proposal& pr) {
    (void)pr;
    TODO_EXERCISE(
        "README \"The greedy rule\": walk the rows of target_logits; where is the first row whose "
        "argmax is not the draft's token, and which row gives the token after all k? exercise.hpp "
        "lists the shapes to check");
}

Verdict accept_sampled(const Proposal& pr, Rng& rng) {
    (void)pr, (void)rng;
    TODO_EXERCISE(
        "README \"The sampling rule\": one uniform draw per judged token decides keep or reject; a "
        "rejection draws from what p has and q lacks (pd::draw_from takes unnormalised weights); "
        "exercise.hpp says what to reject");
}

double expected_tokens_per_pass(double alpha, int k) {
    (void)alpha, (void)k;
    TODO_EXERCISE(
        "README \"What acceptance is worth\": the round yields token i+1 only if the first i draft "
        "tokens were all kept; mind alpha = 1");
}

}  // namespace pd::lab13
