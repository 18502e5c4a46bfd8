// The OpenAI completions API as this server speaks it: a request body checked
// field by field (any mistake is one ApiError, answered 400 with OpenAI's
// error JSON), and the JSON of responses and of server-sent-event chunks.
//
//   POST /v1/completions  {"prompt": "text" | [ids], "max_tokens": 16,
//     "temperature": 1, "top_p": 1, "top_k": 0, "seed": S, "stop": "s" | ["s", ...],
//     "stream": false, "stream_options": {"include_usage": true}, "ignore_eos": false,
//     "model": "...", "n": 1, "logprobs": null, "echo": false, "user": "..."}
//   POST /v1/chat/completions  {"messages": [{"role": "user", "content": "text"}, ...],
//     "max_tokens" (or "max_completion_tokens"), and the sampling, stop and stream fields
//     above}: the prompt is the checkpoint's chat_template rendered with the
//     messages and add_generation_prompt=true (io/chat_template.hpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.hpp"
#include "io/chat_template.hpp"
#include "io/tokenizer.hpp"

namespace pd::serve {

// A request the server refuses: HTTP status, OpenAI error type, the field at fault.
struct ApiError : std::runtime_error {
    ApiError(int status, std::string type, std::string param, const std::string& message)
        : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)) {}
    int status;
    std::string type;   // "invalid_request_error"
    std::string param;  // "max_tokens", or "" when no one field is at fault
};

// What a request is checked against.
struct ApiLimits {
    const Tokenizer* tokenizer = nullptr;
    int vocab_size = 0;
    int context = 0;  // positions one request may use: prompt + max_tokens - 1
    const tok::ChatTemplate* chat_template = nullptr;  // null: chat requests are answered 400 ...
    std::string chat_template_problem;                 // ... with this, or that the model has none
};

struct CompletionRequest {
    std::string model;               // as the client named it (echoed back)
    std::vector<int> prompt;         // (P) token ids, P >= 1
    int max_tokens = 16;             // OpenAI's default
    SamplerConfig sampler{1.0f, 0, 1.0f, 0};  // OpenAI's defaults: temperature 1, top_p 1
    bool seeded = false;             // false: the server picks a seed
    std::vector<std::string> stop;   // up to 4 strings, as OpenAI allows
    bool stream = false;
    bool include_usage = false;      // stream_options.include_usage: a last chunk with usage
    bool ignore_eos = false;         // vLLM's extension: always generate max_tokens
    bool chat = false;               // from /v1/chat/completions: answered in chat's format
};

// Parses and checks `body`; throws ApiError (400) on any problem.
CompletionRequest parse_completion_request(std::string_view body, const ApiLimits& limits);

// The same for a chat request: the prompt is the rendered chat_template; 400
// when the model has none, the template refuses the messages, or they fail the checks.
CompletionRequest parse_chat_request(std::string_view body, const ApiLimits& limits);

// The prompt text /v1/chat/completions gives the model for `request`'s
// messages ({"messages": [...]}, checked as the endpoint checks them):
// `chat_template` rendered with them (pdlab chat-prompt shows it). ApiError
// (400) on bad messages, or when the template refuses them (raise_exception).
std::string chat_prompt_text(const nlohmann::json& request, const tok::ChatTemplate& chat_template,
                             bool add_generation_prompt);

// What every response of one request carries.
struct ResponseMeta {
    std::string id;        // "cmpl-7"
    std::int64_t created;  // unix seconds
    std::string model;
};

struct Usage {
    int prompt_tokens = 0;
    int completion_tokens = 0;
};

// {"error": {"message", "type", "param", "code"}}
std::string error_json(const ApiError& e);
// One streamed chunk: choices[0] = {text, index 0, logprobs null, finish_reason}
// (finish_reason "" is written as null).
std::string chunk_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason);
// The chunk stream_options.include_usage asks for: no choices, the usage.
std::string usage_chunk_json(const ResponseMeta& m, const Usage& u);
// The whole non-streamed response.
std::string completion_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                            const Usage& u);

// Chat's chunk: choices[0].delta holds the role (the first chunk) and/or the
// content; the last chunk carries finish_reason and an empty delta.
std::string chat_chunk_json(const ResponseMeta& m, const char* role, std::string_view text,
                            std::string_view finish_reason);
std::string chat_usage_chunk_json(const ResponseMeta& m, const Usage& u);
// choices[0].message = {"role": "assistant", "content": text}
std::string chat_completion_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                                 const Usage& u);

}  // namespace pd::serve
