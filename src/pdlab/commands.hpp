// Each subcommand registers its options on the app and returns the function
// that runs it (returning the exit code).
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace pd::cli {

using Runner = std::function<int()>;
using Command = std::pair<CLI::App*, Runner>;

// A command whose options live in one struct, shared by the flags that fill it
// (`add_options` registers them and returns the subcommand) and by `run`, which
// runs after parsing: the struct outlives this call in the runner.
template <class Options, class Run>
Command options_command(CLI::App& app, CLI::App* (*add_options)(CLI::App&, Options&), Run run) {
    auto o = std::make_shared<Options>();
    CLI::App* sub = add_options(app, *o);
    return {sub, [o, run]() { return run(*o); }};
}

Command add_generate(CLI::App& app);
Command add_logits(CLI::App& app);
Command add_trace(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_roofline(CLI::App& app);
Command add_info(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_detokenize(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_isa(CLI::App& app);
Command add_serve_sim(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_loadgen(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_chat_prompt(CLI::App& app);
Command add_chat(CLI::App& app);

inline std::vector<Command> register_commands(CLI::App& app) {
    return {add_generate(app), add_logits(app),   add_trace(app),      add_bench(app),
            add_info(app),     add_tokenize(app), add_detokenize(app), add_compare(app),
            add_roofline(app), add_isa(app),      add_serve_sim(app),  add_serve(app),
            add_loadgen(app),  add_perplexity(app), add_chat_prompt(app),
            add_chat(app)};
}

}  // namespace pd::cli
