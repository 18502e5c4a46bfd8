#include "io/regex.hpp"

#include <cstdint>

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/utf8.hpp"

namespace pd::tok {

MatchData new_match_data() { return {pcre2_match_data_create(1, nullptr), &pcre2_match_data_free}; }

Regex::Regex(const std::string& pattern, const std::string& origin, bool literal) {
    int err;
    PCRE2_SIZE at;
    std::uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                     &err, &at, nullptr);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        fail("{}: cannot compile the regex {} (at offset {}: {})", origin, clipped_quote(pattern), at,
             reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // failure just means the slower interpreter
    code_.reset(code, &pcre2_code_free);
}

bool Regex::find(std::string_view subject, std::size_t from, MatchData& md, std::size_t& begin,
                 std::size_t& end) const {
    while (from < subject.size()) {
        int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), from,
                             PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            fail("tokenizer regex failed on a {}-byte piece of text: {}", subject.size(),
                 reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        begin = ov[0], end = ov[1];
        if (end > begin) return true;
        from = begin + next_utf8(subject, begin).len;
    }
    return false;
}

bool Regex::matches(std::string_view ch) const {
    MatchData md = new_match_data();
    std::size_t b, e;
    return find(ch, 0, md, b, e);
}

}  // namespace pd::tok
