// pdlab tokenize / detokenize: text <-> token ids with a model's tokenizer.
#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"

namespace pd::cli {

Command add_tokenize(CLI::App& app) {
    struct Opts {
        std::string model = "tiny", text;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("tokenize",
        "Print the token ids of TEXT, comma-separated on one line (reads only tokenizer.json).\n"
        "Example: pdlab tokenize --text \"Once upon a time\"");
    sub->add_option("--model,-m", o->model, model_help())->capture_default_str();
    sub->add_option("--text", o->text, "the text to tokenise")->required();
    return {sub, [o]() {
        Tokenizer tok = load_tokenizer(o->model);
        std::printf("%s\n", fmt::format("{}", fmt::join(tok.encode(o->text), ",")).c_str());
        return 0;
    }};
}

Command add_detokenize(CLI::App& app) {
    struct Opts {
        std::string model = "tiny", ids;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("detokenize",
        "Print the text of a comma-separated list of token ids.\n"
        "Example: pdlab detokenize --ids 1,2,3");
    sub->add_option("--model,-m", o->model, model_help())->capture_default_str();
    sub->add_option("--ids", o->ids, "comma-separated token ids")->required();
    return {sub, [o]() {
        Tokenizer tok = load_tokenizer(o->model);
        std::printf("%s\n", tok.decode(parse_ids(o->ids)).c_str());
        return 0;
    }};
}

}  // namespace pd::cli
