// pdlab: generate text, dump logits, trace and benchmark a model, replay request traces.
//   pdlab <command> --help   tells what each command does and takes.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common.hpp"

int main(int argc, char** argv) {
    CLI::App app{
        "pdlab: the prefill/decode lab kit's command-line program.\n"
        "Runs a decoder-only language model on the CPU (or a CUDA GPU) and shows its two phases:\n"
        "prefill, one parallel pass over the whole prompt that fills the KV cache and yields the\n"
        "first token, and decode, one token per step reading the growing cache.\n"
        "Start with:  pdlab generate --prompt \"Once upon a time\" -n 40"};
    app.require_subcommand(1);
    app.fallthrough();
    auto runners = pd::cli::register_commands(app);
    std::string names;
    bool known = false;
    for (auto& [sub, run] : runners) {
        names += " " + sub->get_name();
        known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {
        std::fprintf(stderr, "pdlab: error: unknown command \"%s\"; the commands are:%s\n"
                     "Run 'pdlab --help' for what each does.\n", argv[1], names.c_str());
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "pdlab: error: %s\nRun 'pdlab %s --help' for the options.\n", e.what(),
                     argc > 1 && argv[1][0] != '-' ? argv[1] : "");
        return 2;
    }
    try {
        for (auto& [sub, run] : runners)
            if (sub->parsed()) return run();
    } catch (const pd::UserError& e) {
        std::fprintf(stderr, "pdlab: error: %s\n", e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "pdlab: error: out of memory (try a smaller model, batch or context)\n");
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pdlab: internal error: %s\n", e.what());
        return 1;
    }
    return 0;
}
