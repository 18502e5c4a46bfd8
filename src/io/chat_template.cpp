#include "io/chat_template.hpp"

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/model_file.hpp"
#include "io/template_parser.hpp"

namespace pd::tok {

namespace {

// tokenizer_config.json spells a special token as "<s>" or as an added token {"content": "<s>", ...}.
tmpl::Json special_tokens(const tmpl::Json& config) {
    tmpl::Json out = tmpl::Json::object();
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
        if (!config.contains(key)) continue;
        const tmpl::Json& v = config[key];
        if (v.is_string()) out[key] = v;
        else if (v.is_object() && v.contains("content") && v["content"].is_string()) out[key] = v["content"];
    }
    return out;
}

// chat_template: one string, or [{"name": "default", "template": "..."}, {"name": "tool_use", ...}].
std::optional<std::string> template_text(const tmpl::Json& t, const std::string& where) {
    if (t.is_null()) return std::nullopt;
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array())
        for (const tmpl::Json& named : t)
            if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
                named["template"].is_string())
                return named["template"].get<std::string>();
    fail("{}: chat_template must be a string or a list of named templates with a \"default\" one", where);
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, tmpl::Json special_tokens)
    : body_(tmpl::parse_template(source)), special_tokens_(std::move(special_tokens)) {}

std::string ChatTemplate::render(const tmpl::Json& messages, bool add_generation_prompt) const {
    tmpl::Json vars = special_tokens_;
    vars["messages"] = messages;
    vars["add_generation_prompt"] = add_generation_prompt;
    vars["tools"] = nullptr;
    vars["documents"] = nullptr;
    return tmpl::render(body_, vars);
}

std::optional<ChatTemplate> load_chat_template(const std::filesystem::path& folder) {
    const std::filesystem::path path = folder / "tokenizer_config.json";
    std::error_code ec;
    if (folder.empty() || !std::filesystem::exists(path, ec)) return std::nullopt;
    const std::string where = path.string();
    tmpl::Json config;
    try {
        config = tmpl::Json::parse(read_regular_file(path, kMaxJsonFileBytes, ""));
    } catch (const tmpl::Json::parse_error& e) {
        fail("{}: not valid JSON ({})", where, e.what());
    }
    if (!config.is_object() || !config.contains("chat_template")) return std::nullopt;
    const std::optional<std::string> text = template_text(config["chat_template"], where);
    if (!text) return std::nullopt;
    try {
        return ChatTemplate(*text, special_tokens(config));
    } catch (const UserError& e) {
        fail("{}: {}", where, e.what());
    }
}

}  // namespace pd::tok
