// What a cheaper precision costs in quality, measured on the model itself:
// perplexity on held-out text, and agreement of greedy choices with a
// reference engine (e.g. int8 against f32). Both run teacher-forced through
// decode, one position per step, so they measure the decode kernels -- the
// ones quantization is for.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engine/engine.hpp"

namespace pd {

// The paragraphs of a text file (separated by blank lines), e.g. the
// held-out stories shipped with a model. UserError if it cannot be read or has none.
std::vector<std::string> read_paragraphs(const std::filesystem::path& path);

struct Perplexity {
    double mean_nll = 0;    // nats per predicted token
    double perplexity = 0;  // exp(mean_nll)
    long tokens = 0;        // tokens predicted: each text's all but its first
};

// Each text (token ids) is a fresh sequence in slot 0: position t's logits
// score token t + 1. A text longer than e.max_seq() is a UserError.
Perplexity perplexity(Engine& e, const std::vector<std::vector<int>>& texts);

struct Agreement {
    long matched = 0, total = 0;  // positions where both engines' argmax agree, of all
    double rate() const { return total ? double(matched) / double(total) : 0; }
};

// `ref` continues each prompt greedily for `steps` tokens; `test` is fed the
// same tokens, and at each of the steps positions its argmax is compared
// with ref's. Teacher-forced: one early disagreement does not derail the rest.
Agreement greedy_agreement(Engine& ref, Engine& test, const std::vector<std::vector<int>>& prompts, int steps);

// The held-out text shipped with a bundled model (data/models/NAME/heldout.txt),
// or "" when the model has none.
std::filesystem::path heldout_text(const std::string& model_spec);

}  // namespace pd
