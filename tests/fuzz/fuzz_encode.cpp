// libFuzzer target: encode() on arbitrary bytes with the bundled tiny model's
// tokenizer. Every input must encode (invalid UTF-8 included) and decode back
// to exactly the input bytes; anything else aborts as a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/tokenizer.hpp"

#ifndef PDLAB_SOURCE_ROOT
#define PDLAB_SOURCE_ROOT "."
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const pd::Tokenizer tok =
        pd::Tokenizer::from_json(PDLAB_SOURCE_ROOT "/data/models/tiny/tokenizer.json");
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string back = tok.decode(tok.encode(text));
    if (back != text) {
        std::fprintf(stderr, "decode(encode(s)) != s for an input of %zu bytes\n", size);
        std::abort();
    }
    return 0;
}
