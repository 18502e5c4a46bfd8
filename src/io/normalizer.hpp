// Normalization: what tokenizer.json's "normalizer" does to each stretch of
// plain text (between added tokens) before pre-tokenization: Unicode normal
// forms and lowercasing (on utf8proc), whitespace stripping, replacements and
// a prefix (SentencePiece's "▁" in Llama 2 style files).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/regex.hpp"

namespace pd::tok {

// One normalizer of a Sequence (a Sequence is flattened into its steps).
struct NormalizerStep {
    enum class Kind { nfc, nfd, nfkc, nfkd, lowercase, strip, replace, prepend } kind;
    bool strip_left = false, strip_right = false;  // Strip: which ends lose their white space
    std::optional<Regex> pattern;                  // Replace: every match of this ...
    std::string content;                           // ... becomes this; Prepend: the prefix
};

// Applies the steps in order to `text`. Bytes that are not valid UTF-8 are
// left as they are (HF only ever sees valid text); the steps work on the
// valid runs between them.
void normalize(const std::vector<NormalizerStep>& steps, std::string& text, MatchData& md);

}  // namespace pd::tok
