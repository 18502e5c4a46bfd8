// The tables behind a Tokenizer (tokenizer.hpp), for the files that fill them
// (tokenizer_json.cpp; Tokenizer::bytes in tokenizer.cpp) and those that read
// them (tokenizer.cpp, bpe.cpp). Not for callers of the tokenizer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/added_tokens.hpp"
#include "io/bpe.hpp"
#include "io/pretokenizer.hpp"
#include "io/tokenizer.hpp"

namespace pd {

namespace tok {

// Lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int, StringHash, std::equal_to<>>;

// What an unused id decodes to: "<|id|>".
std::string placeholder(int id);

}  // namespace tok

struct Tokenizer::Data {
    std::string kind;
    int vocab_size = 0;
    // Bytes of each id below pieces.size(); ids from there to vocab_size are
    // unused and decode to a placeholder.
    std::vector<std::string> pieces;
    // The single-byte token each byte starts out as before merging; -1: none.
    std::array<int, 256> byte_ids{};
    std::unordered_map<std::uint64_t, tok::MergeRule> merges;  // pair_key(left, right) -> rule
    tok::StringMap vocab_ids;                                  // raw bytes of a vocabulary entry -> id
    tok::StringMap added_ids;                                  // added token content -> id
    bool ignore_merges = false;
    int unk_id = -1;
    bool fuse_unk = false;
    tok::AddedTokenMatcher raw_added;         // matched in the text as given
    tok::AddedTokenMatcher normalized_added;  // matched after normalization
    std::vector<tok::PreTokenizerStep> pre_tokenizer;

    // Throws UserError for an id outside 0..vocab_size-1 (tokenizer.cpp).
    std::string bytes_of(int id) const;
    // BPE on one pre-token (bpe.cpp): appends its ids to `out`.
    void merge_piece(std::string_view piece, std::vector<int>& out) const;
};

}  // namespace pd
