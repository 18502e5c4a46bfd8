// generation_config.json: the decoding a checkpoint suggests, which Hugging
// Face's generate() applies by default (sampling at temperature 0.6 and top-p
// 0.9 for Llama 3's instruct models, more end-of-sequence ids, beams, ...).
// The kit does not apply it: sampling comes from the command line
// (--temperature, --top-k, --top-p, --seed) and the end of sequence from
// config.json. So that the difference
// is never silent, every key of it that changes the tokens generated is named
// (pdlab info, and a note from pdlab generate and serve).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/config.hpp"

namespace pd {

struct GenerationKey {
    std::string key;    // "temperature"
    std::string value;  // its JSON text, clipped: "0.6"
};

// The keys of FOLDER/generation_config.json that would change the tokens
// generated, by name; none when the file is absent. An
// eos_token_id that says what config.json says is left out; keys that change
// nothing (transformers_version, pad_token_id, ...) too. A UserError for a
// file that is not JSON.
std::vector<GenerationKey> generation_keys_not_applied(const std::filesystem::path& folder, const Config& c);

// "generation_config.json asks for temperature 0.6, top_p 0.9; not applied: ..."
// ("" for none): one line for info and for a note on stderr.
std::string describe_not_applied(const std::vector<GenerationKey>& keys);

}  // namespace pd
