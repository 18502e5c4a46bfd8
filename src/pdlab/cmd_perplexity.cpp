// pdlab perplexity: how well a model predicts text it was not trained on, in
// the chosen precision (the quality side of bf16 and int8's saved bytes).
#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"
#include "measure/quality.hpp"

namespace pd::cli {

namespace {

struct PerplexityOptions {
    CommonOptions common;
    std::string text;  // a file of paragraphs; default: the model's held-out text
};

// What `pdlab perplexity --help` says before the options.
constexpr const char* kPerplexityAbout = R"(Perplexity of the model on a text: exp of the mean negative log-likelihood of each next
token, every paragraph a fresh sequence, scored one position per decode step (so the
decode kernels of --precision are what is measured). Lower is better; compare precisions
on the same text. The bundled tiny model ships stories it never saw (heldout.txt).
Example: pdlab perplexity --precision int8 --group-size 64)";

CLI::App* add_perplexity_options(CLI::App& app, PerplexityOptions& o) {
    auto* sub = app.add_subcommand("perplexity", kPerplexityAbout);
    add_common(sub, o.common);
    sub->add_option("--text", o.text,
                    "text file, paragraphs separated by blank lines (default: the bundled model's "
                    "data/models/NAME/heldout.txt)");
    return sub;
}

int run_perplexity(const PerplexityOptions& o) {
    std::filesystem::path path = o.text.empty() ? heldout_text(o.common.model) : std::filesystem::path(o.text);
    if (path.empty())
        fail("--model {} ships no held-out text: give one with --text FILE", o.common.model);
    const auto paragraphs = read_paragraphs(path);
    Session s = load_session(o.common);
    std::vector<std::vector<int>> texts;
    std::size_t longest = 1;
    for (const auto& p : paragraphs) {
        texts.push_back(s.loaded.tokenizer.encode(p));
        longest = std::max(longest, texts.back().size());
    }
    start_engine(s, o.common, 1, std::int64_t(longest));
    const Perplexity r = perplexity(*s.engine, texts);
    std::printf("model %s, precision %s, text %s: %zu paragraphs, %ld tokens predicted\n",
                o.common.model.c_str(), precision_name(s.engine->host_model().precision), path.c_str(),
                texts.size(), r.tokens);
    std::printf("mean NLL %.4f nats/token, perplexity %.3f\n", r.mean_nll, r.perplexity);
    if (!o.common.json.empty())
        write_json_file(o.common.json, {{"model", o.common.model},
                                        {"precision", precision_name(s.engine->host_model().precision)},
                                        {"text", path.string()}, {"tokens", r.tokens},
                                        {"mean_nll", r.mean_nll}, {"perplexity", r.perplexity}});
    return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) { return options_command(app, add_perplexity_options, run_perplexity); }

}  // namespace pd::cli
