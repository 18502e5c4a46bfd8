#include "serve/openai_api.hpp"

#include <algorithm>
#include <array>

#include <fmt/ranges.h>

#include "common.hpp"
#include "io/chat_template.hpp"
#include "io/json_checked.hpp"

namespace pd::serve {

namespace {

using Fields = std::vector<std::string_view>;
const Fields kCompletionFields = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop",
                                  "stream", "stream_options", "ignore_eos", "n", "best_of", "logprobs", "echo", "user"};
const Fields kChatFields = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
                            "seed", "stop", "stream", "stream_options", "ignore_eos", "n", "logprobs", "user"};
// OpenAI allows at most 4 stop sequences and documents no length; each is
// matched against every token's text, so a bound keeps one request's cost
// small. 256 bytes is far past any real stop string ("\n\n", "###", "</s>").
constexpr int kMaxStops = 4;
constexpr std::size_t kMaxStopBytes = 256;

ApiError bad_request(std::string param, const std::string& message) {
    return ApiError(400, "invalid_request_error", std::move(param), message);
}

// Runs `read`, turning the checked-JSON UserError it may throw into a 400 naming `param`.
template <class Read>
void field(const char* param, Read read) {
    try {
        read();
    } catch (const UserError& e) {
        throw bad_request(param, e.what());
    }
}

Json parse_body(std::string_view body, const Fields& known) {
    Json j;
    field("", [&] { j = parse_json(body, "request body"); });
    if (!j.is_object())
        throw bad_request("", "the request body must be a JSON object, got " + describe_json(j));
    for (const auto& [key, value] : j.items())
        if (std::find(known.begin(), known.end(), key) == known.end())
            throw bad_request(key, "unknown field " + clipped_quote(key) + "; this server reads " +
                                       fmt::format("{}", fmt::join(known, ", ")));
    return j;
}

// "text" (tokenised here) or [id, ...] (each checked against the vocabulary).
std::vector<int> read_prompt(const JsonObject& o, const ApiLimits& limits) {
    const Json* p = o.find("prompt");
    if (!p) throw bad_request("prompt", "prompt is missing: give a string or an array of token ids");
    std::vector<int> ids;
    field("prompt", [&] {
        if (p->is_string()) {
            ids = limits.tokenizer->encode(p->get<std::string>());
            return;
        }
        const Json& a = json_array(*p, "request: prompt (a string or an array of token ids)");
        ids.reserve(std::min<std::size_t>(a.size(), std::size_t(limits.context) + 1));
        for (std::size_t i = 0; i < a.size() && ids.size() <= std::size_t(limits.context); ++i)
            ids.push_back(int(json_integer(a[i], "request: prompt[" + std::to_string(i) + "]", 0,
                                           limits.vocab_size - 1)));
    });
    if (ids.empty()) throw bad_request("prompt", "prompt is empty: give at least one token");
    return ids;
}

// The prompt and max_tokens together must fit in the context (the last new token is never fed back).
void check_fits(const CompletionRequest& r, const ApiLimits& limits) {
    const long long needed = (long long)r.prompt.size() + r.max_tokens - 1;
    if (needed > limits.context)
        throw bad_request(r.prompt.size() >= std::size_t(limits.context) ? "prompt" : "max_tokens",
                          fmt::format("this model's context is {} tokens, but the prompt ({}{} tokens) plus "
                                      "max_tokens ({}) needs {}: shorten the prompt or lower max_tokens",
                                      limits.context, r.prompt.size() > std::size_t(limits.context) ? "over " : "",
                                      r.prompt.size(), r.max_tokens, needed));
}

void read_sampling(const JsonObject& o, CompletionRequest& r, const ApiLimits& limits) {
    field("max_tokens", [&] { r.max_tokens = int(o.integer_or("max_tokens", 16, 1, limits.context)); });
    // Chat's newer name for it (OpenAI's default there is the rest of the context; the kit keeps 16).
    field("max_completion_tokens",
          [&] { r.max_tokens = int(o.integer_or("max_completion_tokens", r.max_tokens, 1, limits.context)); });
    field("temperature", [&] { r.sampler.temperature = float(o.number_or("temperature", 1.0, 0.0, 2.0)); });
    field("top_p", [&] { r.sampler.top_p = float(o.number_or("top_p", 1.0, 1e-6, 1.0)); });
    field("top_k", [&] { r.sampler.top_k = int(o.integer_or("top_k", 0, -1, limits.vocab_size)); });
    if (r.sampler.top_k < 0) r.sampler.top_k = 0;  // vLLM spells "no limit" as -1
    field("seed", [&] {
        r.seeded = o.find("seed") != nullptr;
        r.sampler.seed = std::uint64_t(o.integer_or("seed", 0, 0, (1LL << 62)));
    });
    field("ignore_eos", [&] { r.ignore_eos = o.bool_or("ignore_eos", false); });
}

// One stop string, refused past kMaxStopBytes.
std::string stop_string(const Json& j, const std::string& where) {
    std::string s = json_string(j, where);
    if (s.size() > kMaxStopBytes)
        fail("{} is {} bytes long; a stop string may be at most {} bytes", where, s.size(), kMaxStopBytes);
    return s;
}

void read_stop(const JsonObject& o, CompletionRequest& r) {
    const Json* s = o.find("stop");
    if (!s) return;
    field("stop", [&] {
        if (s->is_string()) {
            r.stop = {stop_string(*s, "request: stop")};
            return;
        }
        const Json& a = json_array(*s, "request: stop (a string or an array of strings)");
        if (a.size() > std::size_t(kMaxStops))
            fail("request: stop holds {} strings; at most {} are allowed", a.size(), kMaxStops);
        for (std::size_t i = 0; i < a.size(); ++i)
            r.stop.push_back(stop_string(a[i], "request: stop[" + std::to_string(i) + "]"));
    });
}

void read_stream(const JsonObject& o, CompletionRequest& r) {
    field("stream", [&] { r.stream = o.bool_or("stream", false); });
    field("stream_options", [&] {
        if (!o.find("stream_options")) return;
        r.include_usage = o.object("stream_options").bool_or("include_usage", false);
    });
}

// Fields OpenAI has that this server does only in their default form.
void check_defaults_only(const JsonObject& o) {
    field("n", [&] { o.integer_or("n", 1, 1, 1); });
    field("best_of", [&] { o.integer_or("best_of", 1, 1, 1); });
    field("logprobs", [&] {  // chat spells "none" false, completions null
        if (const Json* l = o.find("logprobs"); l && !l->is_null() && *l != Json(false))
            fail("request: logprobs is not supported; leave it out, null or false");
    });
    field("echo", [&] {
        if (o.bool_or("echo", false)) fail("request: echo is not supported; leave it false");
    });
    field("model", [&] { o.string_or("model", ""); });
    field("user", [&] { o.string_or("user", ""); });
}

// The fields both endpoints share, once the prompt is known.
void read_after_prompt(const JsonObject& o, CompletionRequest& r, const ApiLimits& limits) {
    read_sampling(o, r, limits);
    read_stop(o, r);
    read_stream(o, r);
    check_fits(r, limits);
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json meta_json(const ResponseMeta& m, const char* object = "text_completion") {
    return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}

// One message's content: a string, or (OpenAI's newer form) a list of {"type": "text", "text": ...} parts.
std::string message_content(const Json& c, const std::string& where) {
    if (c.is_string()) return c.get<std::string>();
    if (c.is_null()) return "";
    std::string text;
    for (std::size_t i = 0; i < json_array(c, where + " (a string or a list of text parts)").size(); ++i) {
        const JsonObject part(c[i], "request", where + "[" + std::to_string(i) + "]");
        if (part.string("type") != "text") fail("{}: only text parts are supported", part.where("type"));
        text += part.string("text");
    }
    return text;
}

// messages: [{"role", "content"}, ...] as the template reads them (other keys refused by name).
tok::tmpl::Json read_messages(const JsonObject& o) {
    tok::tmpl::Json out = tok::tmpl::Json::array();
    field("messages", [&] {
        const Json& a = o.array("messages");
        if (a.empty()) fail("request: messages is empty: give at least one message");
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string where = "messages[" + std::to_string(i) + "]";
            const JsonObject m(a[i], "request", where);
            for (const auto& item : a[i].items())
                if (item.key() != "role" && item.key() != "content")
                    fail("request: {}.{} is not supported (tools and names are not); give role and content",
                         where, clipped_quote(item.key()));
            out.push_back({{"role", m.string("role")}, {"content", message_content(m.value_or_null("content"), where + ".content")}});
        }
    });
    return out;
}

// The request's messages through the chat template (the prompt's text).
std::string render_chat(const JsonObject& o, const tok::ChatTemplate& chat_template, bool add_generation_prompt) {
    const tok::tmpl::Json messages = read_messages(o);
    try {
        return chat_template.render(messages, add_generation_prompt);
    } catch (const tok::tmpl::RenderError& e) {
        throw bad_request("messages", e.what());
    }
}

// The prompt: the checkpoint's chat template applied to the messages, then tokenised.
std::vector<int> chat_prompt(const JsonObject& o, const ApiLimits& limits) {
    if (!limits.chat_template)
        throw bad_request("messages", limits.chat_template_problem.empty()
                                          ? "this model has no chat_template (tokenizer_config.json), so it takes no chat "
                                            "messages; use /v1/completions with a prompt"
                                          : limits.chat_template_problem);
    const std::string text = render_chat(o, *limits.chat_template, true);
    std::vector<int> ids;
    field("messages", [&] { ids = limits.tokenizer->encode(text); });
    if (ids.empty()) throw bad_request("messages", "the chat template rendered these messages as no tokens");
    return ids;
}

Json choice_json(std::string_view text, std::string_view finish_reason) {
    return {{"text", text},
            {"index", 0},
            {"logprobs", nullptr},
            {"finish_reason", finish_reason.empty() ? Json(nullptr) : Json(finish_reason)}};
}

Json usage_json(const Usage& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, const ApiLimits& limits) {
    const Json j = parse_body(body, kCompletionFields);
    const JsonObject o(j, "request");
    check_defaults_only(o);
    CompletionRequest r;
    r.model = o.string_or("model", "");
    r.prompt = read_prompt(o, limits);
    read_after_prompt(o, r, limits);
    return r;
}

CompletionRequest parse_chat_request(std::string_view body, const ApiLimits& limits) {
    const Json j = parse_body(body, kChatFields);
    const JsonObject o(j, "request");
    check_defaults_only(o);
    CompletionRequest r;
    r.chat = true;
    r.model = o.string_or("model", "");
    r.prompt = chat_prompt(o, limits);
    read_after_prompt(o, r, limits);
    return r;
}

std::string chat_prompt_text(const Json& request, const tok::ChatTemplate& chat_template, bool add_generation_prompt) {
    if (!request.is_object()) throw bad_request("", "the request must be a JSON object with messages, got " + describe_json(request));
    return render_chat(JsonObject(request, "request"), chat_template, add_generation_prompt);
}

std::string error_json(const ApiError& e) {
    Json err = {{"message", e.what()},
                {"type", e.type},
                {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
                {"code", e.status}};
    return dump(Json{{"error", err}});
}

std::string chunk_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason) {
    Json j = meta_json(m);
    j["choices"] = Json::array({choice_json(text, finish_reason)});
    return dump(j);
}

std::string usage_chunk_json(const ResponseMeta& m, const Usage& u) {
    Json j = meta_json(m);
    j["choices"] = Json::array();
    j["usage"] = usage_json(u);
    return dump(j);
}

std::string completion_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                            const Usage& u) {
    Json j = meta_json(m);
    j["choices"] = Json::array({choice_json(text, finish_reason)});
    j["usage"] = usage_json(u);
    return dump(j);
}

}  // namespace pd::serve

namespace pd::serve {

namespace {

Json chat_choice(const char* key, Json message, std::string_view finish_reason) {
    return {{"index", 0},
            {key, std::move(message)},
            {"logprobs", nullptr},
            {"finish_reason", finish_reason.empty() ? Json(nullptr) : Json(finish_reason)}};
}

}  // namespace

std::string chat_chunk_json(const ResponseMeta& m, const char* role, std::string_view text, std::string_view finish_reason) {
    Json delta = Json::object();
    if (role) delta["role"] = role;
    if (!text.empty() || finish_reason.empty()) delta["content"] = text;
    Json j = meta_json(m, "chat.completion.chunk");
    j["choices"] = Json::array({chat_choice("delta", delta, finish_reason)});
    return dump(j);
}

std::string chat_usage_chunk_json(const ResponseMeta& m, const Usage& u) {
    Json j = meta_json(m, "chat.completion.chunk");
    j["choices"] = Json::array();
    j["usage"] = usage_json(u);
    return dump(j);
}

std::string chat_completion_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                                 const Usage& u) {
    Json j = meta_json(m, "chat.completion");
    j["choices"] = Json::array({chat_choice("message", {{"role", "assistant"}, {"content", text}}, finish_reason)});
    j["usage"] = usage_json(u);
    return dump(j);
}

}  // namespace pd::serve
