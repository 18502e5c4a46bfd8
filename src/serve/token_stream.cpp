#include "serve/token_stream.hpp"

namespace pd::serve {

TokenStream::TokenStream(const Tokenizer& tokenizer, const CompletionRequest& request, int eos_id)
    : request_(request), eos_id_(eos_id), decoder_(tokenizer), stops_(request.stop) {}

StreamEvent TokenStream::push(int id) {
    generated_ += 1;
    StreamEvent e;
    if (id == eos_id_ && !request_.ignore_eos) {
        e.text = stops_.push(decoder_.flush()) + stops_.flush();
        e.finish_reason = "stop";
        return e;
    }
    e.text = stops_.push(decoder_.push(id));
    if (stops_.stopped()) {
        e.finish_reason = "stop";
    } else if (generated_ == request_.max_tokens) {
        StreamEvent last = end("length");
        e.text += last.text;
        e.finish_reason = last.finish_reason;
    }
    return e;
}

StreamEvent TokenStream::end(const std::string& reason) {
    StreamEvent e;
    e.tokens = 0;
    e.text = stops_.push(decoder_.flush());
    e.text += stops_.stopped() ? "" : stops_.flush();
    e.finish_reason = stops_.stopped() ? "stop" : reason;
    return e;
}

}  // namespace pd::serve
