#include "io/added_tokens.hpp"

#include <algorithm>

#include "io/regex.hpp"
#include "io/utf8.hpp"

namespace pd::tok {

namespace {

// A word character as Rust's regex \w (which HF uses) defines it:
// alphabetic, marks, decimal digits, connector punctuation, joiners.
// PCRE2's own \w leaves out the marks.
bool is_word(std::string_view ch) {
    static const Regex word(R"(\A[\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "word-character test");
    return word.matches(ch);
}

bool ends_with_word(std::string_view before) {
    auto c = prev_utf8(before, before.size());
    return c && is_word(before.substr(before.size() - c->len));
}

bool starts_with_word(std::string_view after) {
    if (after.empty()) return false;
    Utf8Char c = next_utf8(after, 0);
    return c.status == Utf8Char::ok && is_word(after.substr(0, c.len));
}

// Widens the match [start, stop) of `t` in `s` over the white space its
// lstrip and rstrip options take.
void widen(const AddedToken& t, std::string_view s, std::size_t& start, std::size_t& stop) {
    if (t.lstrip) {
        while (auto c = prev_utf8(s, start)) {
            if (!is_white_space(c->cp)) break;
            start -= c->len;
        }
    }
    if (t.rstrip) {
        while (stop < s.size()) {
            Utf8Char c = next_utf8(s, stop);
            if (c.status != Utf8Char::ok || !is_white_space(c.cp)) break;
            stop += c.len;
        }
    }
}

}  // namespace

void AddedTokenMatcher::add(AddedToken t) {
    auto& bucket = by_first_byte_[static_cast<unsigned char>(t.content[0])];
    bucket.push_back(tokens_.size());
    tokens_.push_back(std::move(t));
    std::stable_sort(bucket.begin(), bucket.end(), [&](std::size_t a, std::size_t b) {
        return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

void AddedTokenMatcher::split(std::string_view s, std::vector<Segment>& out) const {
    std::size_t done = 0;  // end of the last segment emitted
    for (std::size_t i = 0; i < s.size();) {
        const AddedToken* t = longest_at(s, i);
        if (!t) {
            ++i;
            continue;
        }
        std::size_t start = i, stop = i + t->content.size();
        i = stop;  // the trie resumes after the match whatever the options below decide
        if (t->single_word && (ends_with_word(s.substr(0, start)) || starts_with_word(s.substr(stop))))
            continue;
        // Whitespace that an earlier token's rstrip took stays with it: then
        // start < done after widening, and no plain segment is emitted in between.
        widen(*t, s, start, stop);
        if (done < start) out.push_back({s.substr(done, start - done), -1});
        out.push_back({s.substr(start, stop - start), t->id});
        done = stop;
    }
    if (done < s.size()) out.push_back({s.substr(done), -1});
}

const AddedToken* AddedTokenMatcher::longest_at(std::string_view s, std::size_t i) const {
    for (std::size_t k : by_first_byte_[static_cast<unsigned char>(s[i])])
        if (s.substr(i).starts_with(tokens_[k].content)) return &tokens_[k];
    return nullptr;
}

}  // namespace pd::tok
