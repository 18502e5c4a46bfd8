// BPE on one pre-token, exactly as HF's Word::merge_all: start from one symbol
// per byte or character (initial_symbols) and keep applying the lowest-ranked merge among adjacent pairs,
// leftmost first on ties. A heap of candidate pairs keeps this O(n log n) on
// long pieces; entries made stale by an earlier merge are skipped when popped.
#include "io/bpe.hpp"

#include <queue>
#include <unordered_map>
#include <vector>

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/tokenizer_data.hpp"
#include "io/utf8.hpp"

namespace pd {

namespace {

// The piece as a doubly linked list over a vector, one entry per byte or
// character to begin with; a merge folds the right symbol into the left one.
struct Symbol {
    int id, prev, next;  // prev/next: neighbouring live symbols, -1 at the ends
    int len;             // bytes covered; 0 once merged into its left neighbour
};

// The token a unit of a piece starts out as: a byte's single-byte token
// (byte-level), or the vocabulary entry of a character; -1: none.
int unit_id(const Tokenizer::Data& d, std::string_view unit) {
    if (d.byte_level) return d.byte_ids[static_cast<unsigned char>(unit[0])];
    auto it = d.vocab_ids.find(unit);
    return it == d.vocab_ids.end() ? -1 : it->second;
}

// Whether every byte of `unit` has its "<0xNN>" token (HF's byte fallback
// applies to a whole character or not at all).
bool bytes_covered(const Tokenizer::Data& d, std::string_view unit) {
    for (char ch : unit)
        if (d.byte_ids[static_cast<unsigned char>(ch)] < 0) return false;
    return true;
}

// One symbol per unit of `piece` (a byte if byte-level, else a character,
// or the bytes of an invalid sequence): its token; else, under byte_fallback,
// one symbol per byte; else unk_id, with a run of unknown units fused into
// one symbol under fuse_unk. As HF's BPE::merge_word.
std::vector<Symbol> initial_symbols(const Tokenizer::Data& d, std::string_view piece) {
    std::vector<Symbol> sym;
    sym.reserve(piece.size());
    auto add = [&](int id, int len) {
        int n = int(sym.size());
        sym.push_back({id, n - 1, n + 1, len});
    };
    bool after_unk = false;
    for (std::size_t i = 0; i < piece.size();) {
        int len = d.byte_level ? 1 : int(tok::next_utf8(piece, i).len);
        std::string_view unit = piece.substr(i, len);
        i += len;
        int id = unit_id(d, unit);
        bool unknown = id < 0;
        if (unknown && d.byte_fallback && bytes_covered(d, unit)) {
            for (char ch : unit) add(d.byte_ids[static_cast<unsigned char>(ch)], 1);
            after_unk = false;
            continue;
        }
        if (unknown) {
            if (d.unk_id < 0)
                fail("cannot encode {}: the {} tokenizer has no token for it and no unk_token; use text it "
                     "covers, or a tokenizer whose vocabulary covers all 256 bytes",
                     d.byte_level ? fmt::format("byte 0x{:02X}", static_cast<unsigned char>(unit[0]))
                                  : clipped_quote(unit),
                     d.kind);
            if (d.fuse_unk && after_unk) {
                sym.back().len += len;
                continue;
            }
            id = d.unk_id;
        }
        after_unk = unknown;
        add(id, len);
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
    std::vector<Symbol> sym = initial_symbols(*this, piece);
    merge_all(merges, sym);
    for (const Symbol& s : sym)
        if (s.len > 0) out.push_back(s.id);
}

}  // namespace pd
