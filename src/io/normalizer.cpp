// The normalizers as HF's `tokenizers` applies them (normalizers/*.rs):
// utf8proc for the normal forms and the case mapping, the kit's PCRE2 Regex
// for Replace, Unicode's White_Space (utf8.hpp) for Strip.
#include "io/normalizer.hpp"

#include <cstdlib>
#include <string_view>
#include <utf8proc.h>

#include "common.hpp"
#include "io/utf8.hpp"

namespace pd::tok {

namespace {

// `text` with f(run, out) applied to each maximal run of valid UTF-8; the
// bytes between runs are copied as they are.
template <typename F>
std::string map_valid_runs(std::string_view text, F f) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        std::size_t end = valid_run_end(text, i);
        if (end > i) f(text.substr(i, end - i), out);
        if (end < text.size()) out += text[end++];
        i = end;
    }
    return out;
}

// One of Unicode's four normal forms of a valid run (utf8proc_map's options).
void append_normal_form(std::string_view run, utf8proc_option_t form, std::string& out) {
    utf8proc_uint8_t* mapped = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                      utf8proc_ssize_t(run.size()), &mapped,
                                      utf8proc_option_t(UTF8PROC_STABLE | form));
    if (n < 0) fail("cannot normalize a {}-byte piece of text: {}", run.size(), utf8proc_errmsg(n));
    out.append(reinterpret_cast<const char*>(mapped), std::size_t(n));
    std::free(mapped);
}

// Rust's char::to_lowercase, which HF's Lowercase applies character by
// character: Unicode's lowercase mapping. utf8proc has the one-character
// mappings; U+0130 (İ) is the only character whose unconditional lowercase
// is two characters (SpecialCasing.txt: i + U+0307 combining dot above).
void append_lowercase(std::string_view run, std::string& out) {
    for (std::size_t i = 0; i < run.size();) {
        Utf8Char c = next_utf8(run, i);
        if (c.cp == 0x130) {
            append_utf8(out, U'i');
            append_utf8(out, 0x307);
        } else {
            append_utf8(out, char32_t(utf8proc_tolower(utf8proc_int32_t(c.cp))));
        }
        i += c.len;
    }
}

void append_replaced(std::string_view run, const NormalizerStep& step, MatchData& md, std::string& out) {
    std::size_t pos = 0, b, e;
    while (step.pattern->find(run, pos, md, b, e)) {
        out.append(run.substr(pos, b - pos));
        out += step.content;
        pos = e;
    }
    out.append(run.substr(pos));
}

// HF's Strip: white space off the start and/or the end.
void strip(std::string& text, bool left, bool right) {
    std::size_t begin = 0, end = text.size();
    while (left && begin < end) {
        Utf8Char c = next_utf8(text, begin);
        if (c.status != Utf8Char::ok || !is_white_space(c.cp)) break;
        begin += c.len;
    }
    while (right && end > begin) {
        std::optional<Utf8Char> c = prev_utf8(text, end);
        if (!c || !is_white_space(c->cp)) break;
        end -= c->len;
    }
    text = text.substr(begin, end - begin);
}

void apply(const NormalizerStep& step, std::string& text, MatchData& md) {
    using Kind = NormalizerStep::Kind;
    auto form = [&](utf8proc_option_t options) {
        text = map_valid_runs(text, [&](std::string_view run, std::string& out) {
            append_normal_form(run, options, out);
        });
    };
    switch (step.kind) {
    case Kind::nfc: form(utf8proc_option_t(UTF8PROC_COMPOSE)); break;
    case Kind::nfd: form(utf8proc_option_t(UTF8PROC_DECOMPOSE)); break;
    case Kind::nfkc: form(utf8proc_option_t(UTF8PROC_COMPOSE | UTF8PROC_COMPAT)); break;
    case Kind::nfkd: form(utf8proc_option_t(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT)); break;
    case Kind::lowercase: text = map_valid_runs(text, append_lowercase); break;
    case Kind::strip: strip(text, step.strip_left, step.strip_right); break;
    case Kind::replace:
        text = map_valid_runs(text, [&](std::string_view run, std::string& out) {
            append_replaced(run, step, md, out);
        });
        break;
    case Kind::prepend:
        if (!text.empty()) text.insert(0, step.content);  // HF prepends to non-empty text only
        break;
    }
}

}  // namespace

void normalize(const std::vector<NormalizerStep>& steps, std::string& text, MatchData& md) {
    for (const NormalizerStep& step : steps) apply(step, text, md);
}

}  // namespace pd::tok
