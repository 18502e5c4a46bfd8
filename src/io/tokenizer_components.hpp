// The pipeline stages of tokenizer.json, read from their JSON: "normalizer",
// "pre_tokenizer" and "decoder". Each type the kit does not implement, and
// each field of a type it does not know, is refused by name.
#pragma once

#include <string>
#include <vector>

#include "io/json_checked.hpp"
#include "io/normalizer.hpp"
#include "io/pretokenizer.hpp"
#include "io/tokenizer_data.hpp"

namespace pd::tok {

// Fails naming the first field of `o` outside `known` (the fields HF's
// serialization of that type has).
void only_fields(const JsonObject& o, std::initializer_list<std::string_view> known);

// A normalizer (null: none), a Sequence flattened into its steps.
std::vector<NormalizerStep> read_normalizer(const Json& n, const std::string& origin);

// The pre-tokenizer's steps (null: none). byte_level: the last step is
// ByteLevel, so the vocabulary spells bytes in GPT-2's alphabet.
std::vector<PreTokenizerStep> read_pre_tokenizer(const Json& p, const std::string& origin, bool& byte_level);

// The decoder (null: none, which only a byte-level tokenizer may have).
DecoderRules read_decoder(const Json& d, const std::string& origin, bool byte_level);

}  // namespace pd::tok
