// The n-gram (prompt lookup) proposer of speculative decoding
// (src/serve/ngram_proposer.hpp) on hand-made sequences.
#include <vector>

#include <doctest/doctest.h>

#include "common.hpp"
#include "serve/ngram_proposer.hpp"

using namespace pd::serve;

namespace {

// The proposal for `tokens` with at most `k` tokens and suffixes of max_n down to min_n.
std::vector<int> proposal(const std::vector<int>& tokens, int k, int max_n, int min_n = 1) {
    std::vector<int> out(16, -1);
    const int m = propose_ngram(tokens, {k, max_n, min_n}, out);
    REQUIRE(m >= 0);
    REQUIRE(m <= k);
    out.resize(std::size_t(m));
    return out;
}

}  // namespace

TEST_CASE("serve.ngram.no_match") {
    CHECK(proposal({1, 2, 3, 4, 5}, 4, 3).empty());
    CHECK_MESSAGE(proposal({7}, 4, 3).empty(), "one token has no earlier occurrence");
    CHECK_MESSAGE(proposal({}, 4, 3).empty(), "nothing to look up");
    CHECK_MESSAGE(proposal({1, 2, 3, 1}, 0, 3).empty(), "k = 0 proposes nothing");
    // "2 1" is the suffix; 1 occurs earlier but min_n = 2 forbids a 1-gram.
    CHECK(proposal({1, 5, 2, 1}, 4, 3, 2).empty());
}

TEST_CASE("serve.ngram.most_recent_match") {
    // The suffix "1" occurs at 0 (followed by 2 3) and at 3 (followed by 4 5):
    // the most recent, at 3, wins.
    CHECK(proposal({1, 2, 3, 1, 4, 5, 1}, 2, 1) == std::vector<int>{4, 5});
    // k caps the proposal; the end of the sequence cuts it short.
    CHECK(proposal({1, 2, 3, 1, 4, 5, 1}, 1, 1) == std::vector<int>{4});
    CHECK(proposal({9, 1, 4, 1}, 4, 1) == std::vector<int>{4, 1});
    // A loop: the occurrence overlaps the suffix and the proposal runs into it.
    CHECK(proposal({1, 2, 1, 2, 1}, 3, 2) == std::vector<int>{2, 1});
}

TEST_CASE("serve.ngram.longest_first") {
    // Suffix "7 8 9". The 1-gram "9" last occurred at 6 (followed by 5), the
    // 3-gram "7 8 9" at 0 (followed by 1 2): the longer match wins though older.
    const std::vector<int> t = {7, 8, 9, 1, 2, 3, 9, 5, 7, 8, 9};
    CHECK(proposal(t, 2, 3) == std::vector<int>{1, 2});
    CHECK_MESSAGE((proposal(t, 2, 1) == std::vector<int>{5, 7}), "with n = 1 only, the most recent 9 wins");
    // The 2-gram "8 9" occurs only where "7 8 9" does.
    CHECK(proposal(t, 2, 2) == std::vector<int>{1, 2});
    // No 3-gram match ("4 8 9" is new), but "8 9" occurs: fall back to it.
    CHECK(proposal({8, 9, 6, 4, 8, 9}, 3, 3) == std::vector<int>{6, 4, 8});
    // max_n longer than the sequence allows is cut to what it allows.
    CHECK(proposal({3, 3}, 2, 4) == std::vector<int>{3});
}

TEST_CASE("serve.ngram.bad_config") {
    CHECK_THROWS_AS(check_ngram({-1, 3, 1}), pd::UserError);
    CHECK_THROWS_AS(check_ngram({4, 3, 0}), pd::UserError);
    CHECK_THROWS_AS(check_ngram({4, 2, 3}), pd::UserError);
    CHECK_NOTHROW(check_ngram({0, 3, 1}));
    CHECK_NOTHROW(check_ngram({4, 2, 2}));
}
