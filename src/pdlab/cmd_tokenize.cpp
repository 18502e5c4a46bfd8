// pdlab tokenize / detokenize: text <-> token ids with a model's tokenizer.
#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"

namespace pd::cli {

namespace {

// A command that reads one required input (--text or --ids) and prints what
// the model's tokenizer makes of it; --model names the tokenizer.
using TokenizerAnswer = std::string (*)(const Tokenizer& tok, const std::string& input);

Command tokenizer_command(CLI::App& app, const char* name, const char* about, const char* input,
                          const char* input_help, TokenizerAnswer answer) {
    struct Opts {
        std::string model = "tiny", input;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand(name, about);
    sub->add_option("--model,-m", o->model, model_help())->capture_default_str();
    sub->add_option(input, o->input, input_help)->required();
    return {sub, [o, answer]() {
        std::printf("%s\n", answer(load_tokenizer(o->model), o->input).c_str());
        return 0;
    }};
}

}  // namespace

Command add_tokenize(CLI::App& app) {
    return tokenizer_command(app, "tokenize",
        "Print the token ids of TEXT, comma-separated on one line (reads only tokenizer.json).\n"
        "Example: pdlab tokenize --text \"Once upon a time\"",
        "--text", "the text to tokenise",
        [](const Tokenizer& tok, const std::string& text) { return fmt::format("{}", fmt::join(tok.encode(text), ",")); });
}

Command add_detokenize(CLI::App& app) {
    return tokenizer_command(app, "detokenize",
        "Print the text of a comma-separated list of token ids.\n"
        "Example: pdlab detokenize --ids 1,2,3",
        "--ids", "comma-separated token ids",
        [](const Tokenizer& tok, const std::string& ids) { return tok.decode(parse_ids(ids)); });
}

}  // namespace pd::cli
