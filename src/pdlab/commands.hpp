// Each subcommand registers its options on the app and returns the function
// that runs it (returning the exit code).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace pd::cli {

using Runner = std::function<int()>;
using Command = std::pair<CLI::App*, Runner>;

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

inline std::vector<Command> register_commands(CLI::App& app) {
    return {add_generate(app), add_logits(app),   add_trace(app),      add_bench(app),
            add_info(app),     add_tokenize(app), add_detokenize(app), add_compare(app),
            add_roofline(app), add_isa(app)};
}

}  // namespace pd::cli
