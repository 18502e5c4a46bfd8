// The engine's stop rule (engine/stop_rule.hpp): EOS, max_tokens and the
// context, the core every generation loop asks.
#include <doctest/doctest.h>

#include "engine/stop_rule.hpp"

using pd::StopReason;
using pd::stop_after;

TEST_CASE("engine.stop.length_cap") {
    const pd::StopLimits l{{}, 3, 100};
    CHECK(stop_after(l, 5, 1, 7) == StopReason::none);
    CHECK(stop_after(l, 5, 2, 7) == StopReason::none);
    CHECK(stop_after(l, 5, 3, 7) == StopReason::length);
    CHECK(pd::stop_room(l, 5, 0) == 3);
    CHECK(pd::stop_room(l, 5, 3) == 0);
}

TEST_CASE("engine.stop.context_cap") {
    // 10 positions, a prompt of 8: token 1's decode writes position 8, token 2's
    // position 9, token 3 is never fed back: 3 tokens, prompt + generated = 11.
    const pd::StopLimits l{{}, 50, 10};
    CHECK(stop_after(l, 8, 1, 7) == StopReason::none);
    CHECK(stop_after(l, 8, 2, 7) == StopReason::none);
    CHECK(stop_after(l, 8, 3, 7) == StopReason::length);
    CHECK(pd::stop_room(l, 8, 0) == 3);
    // A prompt that fills the context still yields its one token (the prefill's).
    CHECK(stop_after(l, 10, 1, 7) == StopReason::length);
    CHECK(pd::stop_room(l, 10, 0) == 1);
}

TEST_CASE("engine.stop.every_eos_id") {
    const pd::StopLimits l{{2, 9, 40}, 50, 100};
    for (int eos : {2, 9, 40}) CHECK(stop_after(l, 4, 1, eos) == StopReason::eos);
    for (int other : {0, 1, 3, 10, 39, 41}) CHECK(stop_after(l, 4, 1, other) == StopReason::none);
    // EOS as the last token max_tokens or the context allows: reported as EOS.
    CHECK(stop_after(l, 4, 50, 9) == StopReason::eos);
    CHECK(stop_after({{9}, 50, 4}, 4, 1, 9) == StopReason::eos);
    // No EOS ids (ignore_eos): an EOS token is a token like any other.
    CHECK(stop_after({{}, 50, 100}, 4, 1, 9) == StopReason::none);
}

TEST_CASE("engine.stop.eos_ids_of_a_config") {
    const std::vector<int> config_ids = {128001, 128008, 128009};
    CHECK(pd::eos_ids(config_ids) == config_ids);
    CHECK(pd::eos_ids(config_ids, false).empty());  // --ignore-eos
    CHECK(pd::eos_ids(std::vector<int>{}).empty());
    CHECK(pd::is_eos(std::vector<int>{2, 5}, 5));
    CHECK_FALSE(pd::is_eos(std::vector<int>{}, 5));
}
