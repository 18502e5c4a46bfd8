// Pre-tokenization: splitting each plain-text segment into pieces (words,
// numbers, runs of spaces...) that BPE then merges one at a time, so that no
// token spans two of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/regex.hpp"

namespace pd::tok {

// GPT-2's split, used by the ByteLevel pre-tokenizer when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One pre-tokenizer of a Sequence, applied to every piece in turn.
struct PreTokenizerStep {
    bool add_prefix_space = false;  // ByteLevel: prepend ' ' to a piece not starting with one
    std::optional<Regex> split;     // split each piece at the matches ...
    bool remove_matches = false;    // ... keeping the matches (Isolated) or dropping them (Removed)
};

// Replaces `pieces` by what `step` makes of each of them, in order.
void apply_step(const PreTokenizerStep& step, std::vector<std::string>& pieces, MatchData& md);

}  // namespace pd::tok
