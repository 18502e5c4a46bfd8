// When a request ends, and how much of its text its client may see so far:
// the serving code's one finish rule. The Scheduler applies it to every
// sequence it runs; the SerialWorker (a scheduler of one request at a time)
// to its request. A request ends at the first of
//
//   EOS                 unless ignore_eos                         "stop"
//   a stop string       its text ends just before the earliest one "stop"
//   max_tokens          outputs                                    "length"
//   the context         the next token would not fit               "length"
//
// EOS, max_tokens and the context are the engine's stop rule
// (engine/stop_rule.hpp), which every other generation loop asks too; this
// rule adds stop strings.
//
// With a tokenizer each token also yields the text now safe to send: never a
// split UTF-8 character (StreamDecoder), never any part of a stop string (text
// that may still start one is held back until the next token decides it,
// StopMatcher), and, on the last token, everything held back that is not a
// stop string's. Without one, tokens yield no text and stop strings are refused.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/stop_rule.hpp"
#include "io/tokenizer.hpp"
#include "serve/stop_matcher.hpp"

namespace pd::serve {

enum class FinishReason { none, eos, length, stop_string, cancelled };
const char* finish_reason_name(FinishReason r);  // vLLM's: "stop", "length", "abort"...

// What one request may generate.
struct FinishLimits {
    StopLimits core;                // EOS ids (none with ignore_eos), max_tokens (>= 1), the context
    std::vector<std::string> stop;  // stop strings (non-empty; need a tokenizer)
};

// The verdict on one generated token.
struct TokenVerdict {
    FinishReason finished = FinishReason::none;
    std::string text;  // the text now safe to send ("" without a tokenizer)
};

class FinishRule {
public:
    FinishRule() = default;
    // UserError: max_tokens < 1, or a stop string that is empty or has no tokenizer.
    FinishRule(const std::optional<Tokenizer>& tokenizer, int prompt_len, FinishLimits limits);

    // Generated token `id`: does the request end here, and what text is now safe.
    TokenVerdict push(int id);
    int generated() const { return generated_; }
    // Tokens it may still take before a length limit (max_tokens, the
    // context) ends the request; the last of them ends it.
    int room() const { return stop_room(limits_.core, prompt_len_, generated_); }

private:
    // The text still held back, at the end of the request.
    std::string flush();

    FinishLimits limits_;
    int prompt_len_ = 0, generated_ = 0;
    std::optional<StreamDecoder> decoder_;  // ids -> text, with a tokenizer
    StopMatcher stops_{{}};
};

}  // namespace pd::serve
