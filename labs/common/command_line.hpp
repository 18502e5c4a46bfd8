// A lab program's command line, declared without CLI11: parsing <CLI/CLI.hpp>
// costs several CPU-seconds in every file that includes it (its validators are
// emitted in each), so only command_line.cpp includes it and the labs declare
// their options here. The help text and error messages are CLI11's:
//   lab::CommandLine cl("Lab 06: ...", "06-continuous-batching");
//   cl.common(o.lab);                                   // --model, --threads, ... --json
//   cl.option("--rates", o.rates, "request rates").list().positive().show_default();
//   cl.flag("--no-plot", o.no_plot, "write the CSV only");
//   return lab::run_lab(cl, argc, argv, [&] { return run(o); });
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli_fwd.hpp"

namespace pd::cli {
struct CommonOptions;    // cli_common.hpp
struct TimelineOptions;  // timeline_option.hpp
}  // namespace pd::cli

namespace pd::lab {

// One declared option, to add checks to: each returns *this, so they chain.
class Option {
public:
    explicit Option(CLI::Option* o) : o_(o) {}
    // --help shows the value the option holds now, e.g. "INT [64]".
    Option& show_default();
    // The values of a list option also come comma-separated: --rates 2,8,20.
    Option& list();
    // Values outside [lo, hi] are refused; T is int or double, as in the help ("INT in [1 - 64]").
    template <class T>
    Option& range(T lo, T hi);
    Option& positive();      // > 0
    Option& non_negative();  // >= 0
    Option& existing_file();

private:
    CLI::Option* o_;
};

class CommandLine {
public:
    // `description` opens --help; `name` is the program's name in it.
    CommandLine(const std::string& description, const std::string& name);
    ~CommandLine();
    CommandLine(const CommandLine&) = delete;
    CommandLine& operator=(const CommandLine&) = delete;

    // pdlab's own options (cli_common.hpp), and --timeline (timeline_option.hpp).
    void common(cli::CommonOptions& o);
    void timeline(cli::TimelineOptions& o, const std::string& tracks);

    // An option taking a value: names as "--steps,-n". T is one of the types
    // command_line.cpp instantiates (a link error names one that is missing).
    template <class T>
    Option option(const std::string& names, T& value, const std::string& help);
    // A flag: present sets `value` true ("!--no-x": false).
    Option flag(const std::string& names, bool& value, const std::string& help);

    // Parses argv. Empty when the program goes on; else its exit code, after
    // CLI11 printed the help (0) or what is wrong (2).
    std::optional<int> parse(int argc, char** argv);
    // The MPI ranks other than 0: parse argv, ignoring what is wrong (rank 0 says it).
    void parse_quietly(int argc, char** argv);

private:
    std::unique_ptr<CLI::App> app_;
};

}  // namespace pd::lab
