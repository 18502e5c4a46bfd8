// What every lab program shares beyond pdlab's own options and session
// (cli_common.hpp: --model, --threads, --precision, --device, --json): a main()
// wrapper that turns errors into one clear message and an exit code:
//   0 ok, 1 a check the lab makes on its own results failed, 2 bad input (UserError
//   or a bad option), 3 an exercise is not implemented yet.
#pragma once

#include <functional>

#include "cli_common.hpp"
#include "command_line.hpp"  // what run_lab parses: the lab's options
#include "results.hpp"  // write_lab_json, the --json file every lab writes

namespace pd::lab {

// Parses argv with `cl`, then runs `body`, mapping errors to exit codes.
// With PDLAB_ARGS_ONLY=1 in the environment it stops after the parse (exit 0):
// tests/tools/handout_commands.py checks the long commands of the handouts so.
// Every lab program prints timings: when other work or a hypervisor took CPU
// time meanwhile, a one-line warning follows them (cli::warn_if_timings_unreliable).
int run_lab(CommandLine& cl, int argc, char** argv, const std::function<int()>& body);

// The one way every lab program ends: prints "All checks passed." or which
// went wrong, and returns the exit code (0 when `all_ok`, else 1).
int finish(bool all_ok);

}  // namespace pd::lab
