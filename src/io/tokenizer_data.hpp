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
#include <utility>
#include <vector>

#include "io/added_tokens.hpp"
#include "io/bpe.hpp"
#include "io/normalizer.hpp"
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

// What the decoder does to each token's text and to the start of the text
// (tokenizer_components.cpp reads it; tokenizer_json.cpp applies the
// per-token rules to the pieces once; tokenizer.cpp the rest).
struct DecoderRules {
    bool byte_level = false;                                  // ByteLevel: keys spell bytes
    std::vector<std::pair<std::string, std::string>> replace;  // Replace, per token, in order
    bool byte_fallback = false;                               // ByteFallback: "<0xNN>" is the byte NN
    std::string metaspace;            // Metaspace: this becomes ' ' in each token ...
    bool metaspace_first = false;     // ... except in the first, which loses it (prepend_scheme not never)
    std::string strip;                // Strip after Fuse: up to strip_start leading `strip`
    int strip_start = 0;              //   characters of the whole text are dropped
};

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
    std::vector<tok::NormalizerStep> normalizer;
    std::vector<tok::PreTokenizerStep> pre_tokenizer;
    // byte_level: vocabulary keys spell bytes in GPT-2's alphabet and BPE
    // starts from one symbol per byte (byte_ids). Otherwise (SentencePiece
    // style) keys are text and BPE starts from one symbol per character,
    // found in vocab_ids; a character outside the vocabulary becomes the
    // "<0xNN>" tokens of its bytes (byte_ids) under byte_fallback, else unk.
    bool byte_level = true;
    bool byte_fallback = false;
    tok::DecoderRules decoder;

    // Throws UserError for an id outside 0..vocab_size-1 (tokenizer.cpp).
    std::string bytes_of(int id) const;
    // BPE on one pre-token (bpe.cpp): appends its ids to `out`.
    void merge_piece(std::string_view piece, std::vector<int>& out) const;
};

}  // namespace pd
