// libFuzzer target: the text of a tokenizer.json. Bad input must end in a
// UserError; a crash, a sanitizer report or another exception is a finding.
// An accepted tokenizer also encodes and decodes a fixed sentence.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common.hpp"
#include "io/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        auto tok = pd::Tokenizer::from_json_text(std::string_view(reinterpret_cast<const char*>(data), size),
                                                 "fuzz.json");
        tok.decode(tok.encode("Once upon a time, 12 cats <|endoftext|> said \xc3\xa9!"));
    } catch (const pd::UserError&) {
    }
    return 0;
}
