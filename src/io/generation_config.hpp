// generation_config.json: the decoding a checkpoint suggests, which Hugging
// Face's generate() applies by default (sampling at temperature 0.6 and top-p
// 0.9 for Llama 3's instruct models, more end-of-sequence ids, beams, ...).
// Each key that changes the tokens generated, decided by name:
//   eos_token_id   applied: it replaces config.json's ids (load_hf_config),
//                  since stopping late is a wrong answer, not a choice.
//   do_sample, temperature, top_k, top_p, typical_p, min_p
//                  named, not applied: sampling is what the command line
//                  (--temperature, --top-k, --top-p, --seed) or the request
//                  says, the same for every checkpoint, so a lab's run is
//                  greedy or sampled as its options say.
//   max_length, max_new_tokens, min_length, min_new_tokens
//                  named, not applied: -n and max_tokens set the length.
//   every other key (num_beams, repetition_penalty, no_repeat_ngram_size,
//   bad_words_ids, ...)
//                  named, not applied: the kit does not implement it. Not
//                  refused, so that an instruct checkpoint still loads; the
//                  model's math is untouched, only the decoding differs.
// So that no difference is silent, each key not applied is named (pdlab info,
// and a note from pdlab generate and serve).
#pragma once

#include <filesystem>
#include <string>
#include <vector>


namespace pd {

struct GenerationKey {
    std::string key;    // "temperature"
    std::string value;  // its JSON text, clipped: "0.6"
};

// The keys of FOLDER/generation_config.json that would change the tokens
// generated and are not applied, by name; none when the file is absent.
// eos_token_id (applied) is left out, and so are keys that change nothing
// (transformers_version, pad_token_id, ...). A UserError for a file that is
// not a JSON object.
std::vector<GenerationKey> generation_keys_not_applied(const std::filesystem::path& folder);

// "generation_config.json asks for temperature 0.6, top_p 0.9; not applied: ..."
// ("" for none): one line for info and for a note on stderr.
std::string describe_not_applied(const std::vector<GenerationKey>& keys);

}  // namespace pd
