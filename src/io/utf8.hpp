// UTF-8 for the tokenizer: decoding one character at a time (strictly, so
// that invalid bytes can be told apart), encoding, Unicode white space, and
// GPT-2's byte alphabet, which spells each of the 256 bytes as one visible
// character in tokenizer.json's vocabulary keys.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pd::tok {

struct Utf8Char {
    enum Status { ok, invalid, truncated } status;
    // ok: the character's length; invalid: the maximal invalid subpart
    // (Unicode's rule for where U+FFFD goes); truncated: the valid-so-far tail.
    std::size_t len;
    char32_t cp;  // only meaningful when ok
};

// Decodes the character starting at s[i] (i < s.size()), rejecting overlong
// forms, surrogates and code points above U+10FFFF.
Utf8Char next_utf8(std::string_view s, std::size_t i);
// The end of the longest run of valid characters starting at s[i] (i itself
// when s[i] does not start one).
std::size_t valid_run_end(std::string_view s, std::size_t i);
// The valid character that ends at s[end], if any.
std::optional<Utf8Char> prev_utf8(std::string_view s, std::size_t end);
void append_utf8(std::string& out, char32_t cp);

// Unicode's White_Space property (what Rust's regex \s means, which HF uses
// for the lstrip/rstrip options of added tokens).
bool is_white_space(char32_t c);

// GPT-2's bytes_to_unicode(): the character that spells byte b is [b].
const std::array<char32_t, 256>& byte_chars();
// Translates a vocabulary key back to raw bytes; nullopt if it uses a
// character outside the byte alphabet.
std::optional<std::string> key_to_bytes(std::string_view key);

}  // namespace pd::tok
