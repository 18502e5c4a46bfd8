#include "serve/finish_rule.hpp"

#include "common.hpp"

namespace pd::serve {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::none: return "none";
        case FinishReason::eos: return "stop";  // vLLM: EOS and stop strings are "stop"
        case FinishReason::stop_string: return "stop";
        case FinishReason::length: return "length";
        case FinishReason::cancelled: return "abort";
    }
    return "?";
}

FinishRule::FinishRule(const std::optional<Tokenizer>& tokenizer, int prompt_len, FinishLimits limits)
    : limits_(std::move(limits)), prompt_len_(prompt_len), stops_(limits_.stop) {
    if (limits_.core.max_tokens < 1) fail("max_tokens must be at least 1, got {}", limits_.core.max_tokens);
    for (const auto& s : limits_.stop)
        if (s.empty() || !tokenizer) fail("stop strings must be non-empty and need a tokenizer");
    if (tokenizer) decoder_.emplace(*tokenizer);
}

TokenVerdict FinishRule::push(int id) {
    generated_ += 1;
    TokenVerdict v;
    const StopReason why = stop_after(limits_.core, prompt_len_, generated_, id);
    if (why == StopReason::eos) {  // EOS itself is not text
        v.text = flush();
        v.finished = FinishReason::eos;
        return v;
    }
    if (decoder_) v.text = stops_.push(decoder_->push(id));
    if (stops_.stopped()) {
        v.finished = FinishReason::stop_string;
        return v;
    }
    if (why == StopReason::length) {
        v.text += flush();  // the flushed end may still complete a stop string
        v.finished = stops_.stopped() ? FinishReason::stop_string : FinishReason::length;
    }
    return v;
}

std::string FinishRule::flush() {
    if (!decoder_) return "";
    std::string text = stops_.push(decoder_->flush());
    return text + stops_.flush();  // "" once a stop string has claimed the rest
}

}  // namespace pd::serve
