// One request's generated ids turned into what its client is sent: text that
// never splits a UTF-8 character nor shows any part of a stop string, and the
// finish_reason of the token that ends the request (EOS, a stop string or
// max_tokens). Both workers (serial_worker.hpp, batching_worker.hpp) stream
// through it, so the same ids give the client the same bytes whichever runs them.
#pragma once

#include <string>

#include "io/tokenizer.hpp"
#include "serve/job.hpp"
#include "serve/stop_matcher.hpp"

namespace pd::serve {

class TokenStream {
public:
    TokenStream(const Tokenizer& tokenizer, const CompletionRequest& request, int eos_id);

    // The event for generated token `id`; its finish_reason is set when `id`
    // ends the request ("stop" or "length"), "" otherwise.
    StreamEvent push(int id);
    // Ends the request early for `reason` ("length" when the context is full):
    // the held-back text, if no stop string has claimed it.
    StreamEvent end(const std::string& reason);
    int generated() const { return generated_; }

private:
    const CompletionRequest& request_;
    int eos_id_;
    StreamDecoder decoder_;  // ids -> text, never splitting a UTF-8 character
    StopMatcher stops_;      // holds back text that may start a stop string
    int generated_ = 0;
};

}  // namespace pd::serve
