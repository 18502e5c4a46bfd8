#include "io/pretokenizer.hpp"

#include <string_view>

#include "io/utf8.hpp"

namespace pd::tok {

namespace {

void split_piece(const PreTokenizerStep& step, std::string_view piece, std::vector<std::string>& out,
                 MatchData& md) {
    // The regex runs on maximal valid UTF-8 runs; each byte outside them
    // becomes a piece of its own (HF only ever sees valid UTF-8).
    for (std::size_t i = 0; i < piece.size();) {
        std::size_t run_end = i;
        while (run_end < piece.size()) {
            Utf8Char c = next_utf8(piece, run_end);
            if (c.status != Utf8Char::ok) break;
            run_end += c.len;
        }
        std::string_view run = piece.substr(i, run_end - i);
        std::size_t pos = 0, b, e;
        while (step.split->find(run, pos, md, b, e)) {
            if (b > pos) out.emplace_back(run.substr(pos, b - pos));
            if (!step.remove_matches) out.emplace_back(run.substr(b, e - b));
            pos = e;
        }
        if (pos < run.size()) out.emplace_back(run.substr(pos));
        if (run_end < piece.size()) out.emplace_back(piece.substr(run_end++, 1));
        i = run_end;
    }
}

}  // namespace

void apply_step(const PreTokenizerStep& step, std::vector<std::string>& pieces, MatchData& md) {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (std::string& p : pieces) {
        if (step.add_prefix_space && p[0] != ' ') p.insert(0, 1, ' ');
        if (step.split)
            split_piece(step, p, out, md);
        else
            out.push_back(std::move(p));
    }
    pieces.swap(out);
}

}  // namespace pd::tok
