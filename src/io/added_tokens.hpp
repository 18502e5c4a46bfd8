// Added tokens (special tokens such as <|endoftext|>, and any others the
// tokenizer.json lists): matched literally in the text before anything else,
// so that they are never split by the pre-tokenizer or merged by BPE.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pd::tok {

// A stretch of the text: an added token, or plain text between them.
struct Segment {
    std::string_view text;
    int id;  // the added token's id, or -1 for plain text still to tokenize
};

struct AddedToken {
    std::string content;
    int id;
    bool single_word, lstrip, rstrip;
};

// Splits text around added tokens the way HF's AddedVocabulary does:
// non-overlapping leftmost-longest matches (its Aho-Corasick trie), then the
// per-token options, which may drop a match or widen it over whitespace.
class AddedTokenMatcher {
public:
    void add(AddedToken t);

    // Appends the non-empty segments of `s` to `out`.
    void split(std::string_view s, std::vector<Segment>& out) const;

private:
    const AddedToken* longest_at(std::string_view s, std::size_t i) const;

    std::vector<AddedToken> tokens_;
    std::array<std::vector<std::size_t>, 256> by_first_byte_;  // indices, longest content first
};

}  // namespace pd::tok
