// BPE on one pre-token, exactly as HF's Word::merge_all: start from one symbol
// per byte and keep applying the lowest-ranked merge among adjacent pairs,
// leftmost first on ties. A heap of candidate pairs keeps this O(n log n) on
// long pieces; entries made stale by an earlier merge are skipped when popped.
#include "io/bpe.hpp"

#include <queue>
#include <unordered_map>
#include <vector>

#include "common.hpp"
#include "io/tokenizer_data.hpp"

namespace pd {

namespace {

// The piece as a doubly linked list over a vector, one entry per byte to
// begin with; a merge folds the right symbol into the left one.
struct Symbol {
    int id, prev, next;  // prev/next: neighbouring live symbols, -1 at the ends
    int len;             // bytes covered; 0 once merged into its left neighbour
};

// One symbol per byte of `piece`: its single-byte token, or unk_id (with a
// run of unknown bytes fused into one symbol under fuse_unk).
std::vector<Symbol> byte_symbols(const Tokenizer::Data& d, std::string_view piece) {
    std::vector<Symbol> sym;
    sym.reserve(piece.size());
    bool after_unk = false;
    for (char ch : piece) {
        auto byte = static_cast<unsigned char>(ch);
        int id = d.byte_ids[byte];
        bool unknown = id < 0;
        if (unknown) {
            if (d.unk_id < 0)
                fail("cannot encode byte 0x{:02X}: the {} tokenizer has no token for it and no "
                     "unk_token; use text it covers, or a tokenizer whose vocabulary holds all 256 bytes",
                     byte, d.kind);
            if (d.fuse_unk && after_unk) {
                sym.back().len++;
                continue;
            }
            id = d.unk_id;
        }
        after_unk = unknown;
        int n = int(sym.size());
        sym.push_back({id, n - 1, n + 1, 1});
    }
    if (!sym.empty()) sym.back().next = -1;
    return sym;
}

// Applies the merges to `sym` until no adjacent pair has one.
void merge_all(const std::unordered_map<std::uint64_t, tok::MergeRule>& merges, std::vector<Symbol>& sym) {
    struct Candidate {
        int rank, pos, id;
    };
    auto later = [](const Candidate& a, const Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> heap(later);
    auto consider = [&](int pos) {  // the pair starting at symbol `pos`
        int right = sym[pos].next;
        if (right < 0) return;
        auto it = merges.find(tok::pair_key(sym[pos].id, sym[right].id));
        if (it != merges.end()) heap.push({it->second.rank, pos, it->second.id});
    };
    for (int i = 0; i + 1 < int(sym.size()); ++i) consider(i);

    while (!heap.empty()) {
        Candidate top = heap.top();
        heap.pop();
        Symbol& left = sym[top.pos];
        if (left.len == 0 || left.next < 0) continue;
        Symbol& right = sym[left.next];
        auto it = merges.find(tok::pair_key(left.id, right.id));
        if (it == merges.end() || it->second.id != top.id) continue;  // stale
        left.id = top.id;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (left.next >= 0) sym[left.next].prev = top.pos;
        if (left.prev >= 0) consider(left.prev);
        consider(top.pos);
    }
}

}  // namespace

void Tokenizer::Data::merge_piece(std::string_view piece, std::vector<int>& out) const {
    if (ignore_merges) {
        if (auto it = vocab_ids.find(piece); it != vocab_ids.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::vector<Symbol> sym = byte_symbols(*this, piece);
    merge_all(merges, sym);
    for (const Symbol& s : sym)
        if (s.len > 0) out.push_back(s.id);
}

}  // namespace pd
