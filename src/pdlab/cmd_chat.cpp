// pdlab chat: a conversation in the terminal with a checkpoint's chat
// template, each answer streamed as it is generated. Every turn renders the
// whole conversation again and prefills it from scratch (no cache is kept
// between turns), so the stats line shows the prompt, and TTFT, growing turn
// by turn: the cost prefix caching (lab 07) saves.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "cli_common.hpp"
#include "commands.hpp"
#include "engine/generate.hpp"
#include "engine/stop_rule.hpp"
#include "io/chat_template.hpp"
#include "serve/openai_api.hpp"

namespace pd::cli {

namespace {

struct ChatCliOptions {
    CommonOptions common;
    std::string system;
    int n = 256;
    bool greedy = false;
    SamplerConfig sampler{0.8f, 40, 0.95f, 42};
};

using Messages = tok::tmpl::Json;  // [{"role", "content"}, ...]

Messages first_messages(const ChatCliOptions& o) {
    Messages m = Messages::array();
    if (!o.system.empty()) m.push_back({{"role", "system"}, {"content", o.system}});
    return m;
}

// One answer to the conversation so far, streamed to stdout; its text, or
// nullopt (with the reason on stderr) when the turn cannot be taken.
std::optional<std::string> answer(const ChatCliOptions& o, Session& s, const tok::ChatTemplate& chat_template,
                                  const Messages& messages) {
    std::vector<int> ids;
    try {
        ids = s.loaded.tokenizer.encode(serve::chat_prompt_text({{"messages", messages}}, chat_template, true));
    } catch (const serve::ApiError& e) {
        std::fprintf(stderr, "pdlab chat: %s\n", e.what());
        return std::nullopt;
    }
    if (generate_positions(ids.size(), o.n) > s.engine->max_seq()) {
        std::fprintf(stderr, "pdlab chat: the conversation (%zu tokens) and an answer of up to %d tokens no longer "
                             "fit the cache of %d positions: /reset starts over (or lower -n, raise --max-seq)\n",
                     ids.size(), o.n, s.engine->max_seq());
        return std::nullopt;
    }
    GenerateOptions g;
    g.max_new_tokens = o.n;
    g.sampler = o.sampler;
    StreamDecoder stream(s.loaded.tokenizer);
    const std::vector<int> eos = eos_ids(s.engine->config().eos_ids, true);
    std::string text;
    const GenerateResult r = generate(*s.engine, ids, g, [&](int id) {
        if (is_eos(eos, id)) return;
        const std::string piece = stream.push(id);
        text += piece;
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
    });
    const std::string rest = stream.flush();  // bytes of a character the last token left open
    text += rest;
    std::fputs((rest + "\n").c_str(), stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "[prompt %zu tokens (the whole conversation, prefilled again), answer %zu tokens%s | "
                         "TTFT %.1f ms | TPOT %.1f ms]\n",
                 ids.size(), r.generated_ids.size(), r.stopped_at_eos ? ", ended at eos" : "", r.ttft_ms, r.tpot_ms);
    return text;
}

int run_chat(ChatCliOptions& o) {
    if (o.greedy) o.sampler.temperature = 0.0f;
    validate(o.sampler);
    const std::optional<tok::ChatTemplate> chat_template = tok::load_chat_template(model_folder(o.common.model));
    if (!chat_template)
        fail("{} has no chat template (no chat_template in tokenizer_config.json), so it cannot chat; "
             "pdlab generate --prompt continues plain text", o.common.model);
    Session s = load_session(o.common);
    start_engine(s, o.common, 1, 0);
    const bool terminal = isatty(STDIN_FILENO);
    std::fprintf(stderr, "chatting with %s (a cache of %d positions). Type a message and Enter; /reset starts over, "
                         "/quit or end of input (Ctrl-D) ends.\n",
                 o.common.model.c_str(), s.engine->max_seq());
    Messages messages = first_messages(o);
    std::string line;
    while (true) {
        if (terminal) std::fputs("you> ", stderr);
        if (!std::getline(std::cin, line) || line == "/quit") break;
        if (line == "/reset") {
            messages = first_messages(o);
            std::fputs("(a new conversation)\n", stderr);
            continue;
        }
        if (line.empty()) continue;
        messages.push_back({{"role", "user"}, {"content", line}});
        const std::optional<std::string> reply = answer(o, s, *chat_template, messages);
        if (reply) messages.push_back({{"role", "assistant"}, {"content", *reply}});
        else messages.erase(messages.end() - 1);
    }
    return 0;
}

// What `pdlab chat --help` says before the options.
constexpr const char* kChatAbout = R"(Chat in the terminal: each line you type is a user message; the model's answer streams back.
The conversation goes through the checkpoint's chat_template (pdlab chat-prompt shows the
prompt) and is prefilled whole at every turn, so the prompt and TTFT grow as it goes on.
Reads standard input, so a file of lines works too.
Example: pdlab chat -m ./Llama-3.2-1B-Instruct --system "Answer briefly.")";

CLI::App* add_chat_options(CLI::App& app, ChatCliOptions& o) {
    auto* sub = app.add_subcommand("chat", kChatAbout);
    add_common(sub, o.common, false);
    sub->add_option("--system", o.system, "a system message to start the conversation with");
    sub->add_option("-n,--max-new-tokens", o.n, "the longest answer, in tokens")
        ->check(CLI::Range(1, 1 << 20).description("(1 or more)"))->capture_default_str();
    add_sampling(sub, o.sampler, o.greedy);
    return sub;
}

}  // namespace

Command add_chat(CLI::App& app) { return options_command(app, add_chat_options, run_chat); }

}  // namespace pd::cli
