// pdlab chat-prompt: the prompt /v1/chat/completions gives the model for some
// chat messages, that is the checkpoint's chat template rendered with them
// (its exact text, or its token ids: the request's usage.prompt_tokens).
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli_common.hpp"
#include "commands.hpp"
#include "io/chat_template.hpp"
#include "io/json_checked.hpp"
#include "serve/openai_api.hpp"

namespace pd::cli {

namespace {

struct ChatPromptOptions {
    std::string model = "tiny", messages;
    bool no_generation_prompt = false, ids = false;
};

// The file's messages as a request body ({"messages": [...]}), or the body itself.
Json read_messages_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("--messages: cannot read {}: give a JSON file such as [{{\"role\": \"user\", \"content\": \"Hi\"}}]", path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Json j = parse_json(text, path);
    return j.is_array() ? Json{{"messages", std::move(j)}} : j;
}

int run_chat_prompt(const ChatPromptOptions& o) {
    const std::optional<tok::ChatTemplate> chat_template = tok::load_chat_template(model_folder(o.model));
    if (!chat_template)
        fail("{} has no chat template (no chat_template in tokenizer_config.json): it takes a plain prompt, "
             "e.g. pdlab generate --prompt", o.model);
    std::string text;
    try {
        text = serve::chat_prompt_text(read_messages_file(o.messages), *chat_template, !o.no_generation_prompt);
    } catch (const serve::ApiError& e) {
        fail("--messages: {}", e.what());
    }
    if (o.ids) std::printf("%s\n", fmt::format("{}", fmt::join(load_tokenizer(o.model).encode(text), ",")).c_str());
    else std::fwrite(text.data(), 1, text.size(), stdout);  // byte for byte: no newline of ours
    return 0;
}

// What `pdlab chat-prompt --help` says before the options.
constexpr const char* kChatPromptAbout = R"(Print the prompt a chat request gives the model: the checkpoint's chat_template
(tokenizer_config.json) rendered with the messages, exactly as pdlab serve's
/v1/chat/completions renders it, with add_generation_prompt on unless told.
Example: pdlab chat-prompt -m ./Llama-3.2-1B-Instruct --messages chat.json --ids)";

CLI::App* add_chat_prompt_options(CLI::App& app, ChatPromptOptions& o) {
    auto* sub = app.add_subcommand("chat-prompt", kChatPromptAbout);
    sub->add_option("--model,-m", o.model, model_help())->capture_default_str();
    sub->add_option("--messages", o.messages,
                    "a JSON file: the messages, [{\"role\": \"system\"|\"user\"|\"assistant\", \"content\": \"...\"}, ...], "
                    "or a request body holding them")
        ->required();
    sub->add_flag("--no-generation-prompt", o.no_generation_prompt,
                  "leave out the assistant header that asks the model to answer");
    sub->add_flag("--ids", o.ids, "print the prompt's token ids (comma-separated: usage.prompt_tokens of them) "
                                  "instead of its text");
    return sub;
}

}  // namespace

Command add_chat_prompt(CLI::App& app) { return options_command(app, add_chat_prompt_options, run_chat_prompt); }

}  // namespace pd::cli
