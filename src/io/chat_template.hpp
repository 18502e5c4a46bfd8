// A checkpoint's chat_template (tokenizer_config.json): the Jinja program
// that turns chat messages into the prompt text the model was trained on.
//
// Debian packages no C++ Jinja library (apt-cache search jinja finds Python's
// jinja2 and editor plugins only), so the kit carries the subset the chat
// templates of Llama 3.x, Qwen2.5/Qwen3, Mistral Instruct, SmolLM2, Gemma 2/3
// and TinyLlama-Chat use: template_lexer (tags, whitespace control),
// template_parser (the tree; everything else refused by name at load) and
// template_eval (the values). Rendering follows transformers'
// apply_chat_template: trim_blocks and lstrip_blocks on, its tojson (indent=)
// and strftime_now, the variables messages, add_generation_prompt, tools
// (none), documents (none) and the special tokens bos_token, eos_token,
// unk_token, pad_token. Beyond set/for/if and expressions: inline if, loops
// that unpack (for k, v in d.items()) or filter (for x in xs if ...), the
// filters selectattr/rejectattr (a generator, read once, as Jinja2's),
// list and string, and the test equalto.
// upper/lower/capitalize map one code point to one (utf8proc), where Python
// would turn "ß" into "SS".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "io/template_ast.hpp"
#include "io/template_eval.hpp"

namespace pd::tok {

class ChatTemplate {
public:
    // UserError naming the line and construct the kit's subset lacks.
    ChatTemplate(std::string_view source, tmpl::Json special_tokens);

    // The prompt for `messages` ([{role, content}, ...]); tmpl::RenderError
    // when the template refuses them (raise_exception) or Jinja2 would fail.
    std::string render(const tmpl::Json& messages, bool add_generation_prompt) const;

private:
    tmpl::Body body_;
    tmpl::Json special_tokens_;  // {"bos_token": "<s>", ...}
};

// The chat template of FOLDER/tokenizer_config.json; nullopt when the file or
// its chat_template is absent. UserError for a template outside the subset,
// or a list of named templates without a "default" one.
std::optional<ChatTemplate> load_chat_template(const std::filesystem::path& folder);

}  // namespace pd::tok
