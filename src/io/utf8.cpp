#include "io/utf8.hpp"

namespace pd::tok {

// --- UTF-8 ------------------------------------------------------------------

Utf8Char next_utf8(std::string_view s, std::size_t i) {
    auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) return {Utf8Char::ok, 1, b0};
    int need;
    char32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the next byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2, cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;  // overlong
        if (b0 == 0xED) hi = 0x9F;  // surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3, cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;  // overlong
        if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        return {Utf8Char::invalid, 1, 0};
    }
    std::size_t n = 1;
    for (int k = 0; k < need; ++k, ++n) {
        if (i + n >= s.size()) return {Utf8Char::truncated, n, 0};
        auto b = static_cast<unsigned char>(s[i + n]);
        if (b < lo || b > hi) return {Utf8Char::invalid, n, 0};
        cp = (cp << 6) | (b & 0x3F);
        lo = 0x80, hi = 0xBF;
    }
    return {Utf8Char::ok, n, cp};
}

std::optional<Utf8Char> prev_utf8(std::string_view s, std::size_t end) {
    for (std::size_t len = 1; len <= 4 && len <= end; ++len) {
        auto b = static_cast<unsigned char>(s[end - len]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking back
        Utf8Char c = next_utf8(s, end - len);
        if (c.status == Utf8Char::ok && c.len == len) return c;
        return std::nullopt;
    }
    return std::nullopt;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

std::size_t valid_run_end(std::string_view s, std::size_t i) {
    while (i < s.size()) {
        Utf8Char c = next_utf8(s, i);
        if (c.status != Utf8Char::ok) break;
        i += c.len;
    }
    return i;
}

bool is_white_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

// --- GPT-2's byte alphabet --------------------------------------------------

// bytes_to_unicode(): printable Latin-1 bytes stand for themselves; the other
// 68 bytes (controls, space, 0x7F-0xA0, 0xAD) become U+0100.. in byte order, so
// every byte is spelled by one visible character (space is 'Ġ' = U+0120).
const std::array<char32_t, 256>& byte_chars() {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            t[b] = printable ? char32_t(b) : next++;
        }
        return t;
    }();
    return table;
}

std::optional<std::string> key_to_bytes(std::string_view key) {
    constexpr char32_t kEnd = 0x100 + 68;  // the alphabet's characters are all below this
    static const std::array<int, kEnd> byte_of = [] {
        std::array<int, kEnd> t;
        t.fill(-1);
        for (int b = 0; b < 256; ++b) t[byte_chars()[b]] = b;
        return t;
    }();
    std::string out;
    out.reserve(key.size());
    for (std::size_t i = 0; i < key.size();) {
        Utf8Char c = next_utf8(key, i);
        if (c.status != Utf8Char::ok || c.cp >= kEnd || byte_of[c.cp] < 0) return std::nullopt;
        out += char(byte_of[c.cp]);
        i += c.len;
    }
    return out;
}

}  // namespace pd::tok
