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
        std::size_t run_end = valid_run_end(piece, i);
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

// HF's Metaspace on one piece: spaces replaced, the prefix added by the
// scheme, then split before each replacement (MergedWithNext).
void metaspace_piece(const PreTokenizerStep& step, std::string& p, bool first, std::vector<std::string>& out) {
    const std::string& rep = step.metaspace;
    for (std::size_t at = p.find(' '); at != std::string::npos; at = p.find(' ', at + rep.size()))
        p.replace(at, 1, rep);
    bool prepend = step.prepend == PreTokenizerStep::Prepend::always ||
                   (step.prepend == PreTokenizerStep::Prepend::first && first);
    if (prepend && !p.starts_with(rep)) p.insert(0, rep);
    if (!step.metaspace_split) {
        out.push_back(std::move(p));
        return;
    }
    std::size_t begin = 0;
    for (std::size_t at = p.find(rep, 1); at != std::string::npos; at = p.find(rep, at + rep.size())) {
        out.push_back(p.substr(begin, at - begin));
        begin = at;
    }
    out.push_back(p.substr(begin));
}

}  // namespace

void apply_step(const PreTokenizerStep& step, std::vector<std::string>& pieces, MatchData& md,
                bool at_text_start) {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (std::string& p : pieces) {
        if (!step.metaspace.empty()) {
            metaspace_piece(step, p, at_text_start && &p == &pieces.front(), out);
            continue;
        }
        if (step.add_prefix_space && p[0] != ' ') p.insert(0, 1, ' ');
        if (step.split)
            split_piece(step, p, out, md);
        else
            out.push_back(std::move(p));
    }
    pieces.swap(out);
}

}  // namespace pd::tok
