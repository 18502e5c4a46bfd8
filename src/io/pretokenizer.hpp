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
    // Metaspace (SentencePiece): each ' ' becomes `metaspace` ("▁"), which
    // is put in front of a piece not starting with it (always, or only for
    // the piece at the start of the whole text), and the piece is split
    // before each `metaspace` when metaspace_split.
    std::string metaspace;  // empty: not a Metaspace step
    enum class Prepend { never, first, always } prepend = Prepend::never;
    bool metaspace_split = false;
};

// Replaces `pieces` by what `step` makes of each of them, in order.
// at_text_start: pieces[0] begins at the start of the text being encoded
// (not after an added token), which Metaspace's "first" scheme asks.
void apply_step(const PreTokenizerStep& step, std::vector<std::string>& pieces, MatchData& md,
                bool at_text_start);

}  // namespace pd::tok
