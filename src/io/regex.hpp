// PCRE2 patterns for the tokenizer's text splitting: the pre-tokenizer's
// splits and the word-character test of added tokens.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace pd::tok {

using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;

// Only the whole match is read, so one ovector pair serves every pattern.
MatchData new_match_data();

// A compiled pattern with Unicode semantics (\p{L}, \s, (?i) over all of
// Unicode), JIT-compiled where PCRE2 supports it. Immutable, so shareable
// between threads; each thread brings its own MatchData.
class Regex {
public:
    // literal: match `pattern` as plain text. `origin` names where the
    // pattern came from in the error for one PCRE2 cannot compile.
    Regex(const std::string& pattern, const std::string& origin, bool literal = false);

    // The first non-empty match [begin, end) in `subject` (valid UTF-8) at or
    // after `from`. Empty matches are skipped: HF drops empty pieces.
    bool find(std::string_view subject, std::size_t from, MatchData& md, std::size_t& begin,
              std::size_t& end) const;

    // Whether a pattern anchored with \A matches at the start of `ch`, a
    // single valid character.
    bool matches(std::string_view ch) const;

private:
    std::shared_ptr<pcre2_code> code_;
};

}  // namespace pd::tok
