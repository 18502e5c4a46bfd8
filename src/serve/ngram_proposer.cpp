#include "serve/ngram_proposer.hpp"

#include <algorithm>

#include "common.hpp"

namespace pd::serve {

void check_ngram(const NgramSpeculation& c) {
    if (c.k < 0) fail("speculative decoding proposes k >= 0 tokens a decode row (--speculative-k; 0: off), got {}", c.k);
    if (c.min_n < 1 || c.max_n < c.min_n)
        fail("the n-gram lengths looked up must satisfy 1 <= shortest ({}, --ngram-min) <= longest ({}, --ngram-max)",
             c.min_n, c.max_n);
}

int propose_ngram(std::span<const int> tokens, const NgramSpeculation& c, std::span<int> out) {
    const int len = int(tokens.size());
    const int k = std::min(c.k, int(out.size()));
    if (k <= 0) return 0;
    // An occurrence must leave at least one token after it: n <= len - 1.
    for (int n = std::min(c.max_n, len - 1); n >= c.min_n; n--) {
        const auto suffix = tokens.last(std::size_t(n));
        // Most recent first: the occurrence at i is followed by tokens[i + n].
        for (int i = len - n - 1; i >= 0; i--) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
            const int m = std::min(k, len - (i + n));
            std::copy_n(tokens.begin() + i + n, m, out.begin());
            return m;
        }
    }
    return 0;
}

}  // namespace pd::serve
