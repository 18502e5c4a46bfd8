// Byte-pair encoding's merge table: which adjacent pair of tokens merges into
// which token, and how early. The merging itself is Tokenizer::Data::
// merge_piece (bpe.cpp), which starts from one token per byte.
#pragma once

#include <cstdint>

namespace pd::tok {

struct MergeRule {
    int rank;  // the merge's line in tokenizer.json: lower merges first
    int id;    // the merged token
};

// The merge table's key for the pair (left id a, right id b).
inline std::uint64_t pair_key(int a, int b) { return std::uint64_t(std::uint32_t(a)) << 32 | std::uint32_t(b); }

}  // namespace pd::tok
