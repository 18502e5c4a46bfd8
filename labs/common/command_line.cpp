// The one lab file that includes CLI11 (command_line.hpp says why).
#include "command_line.hpp"

#include <cstdint>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_common.hpp"
#include "timeline_option.hpp"

namespace pd::lab {

Option& Option::show_default() {
    o_->capture_default_str();
    return *this;
}

Option& Option::list() {
    o_->delimiter(',');
    return *this;
}

template <class T>
Option& Option::range(T lo, T hi) {
    o_->check(CLI::Range(lo, hi));
    return *this;
}
template Option& Option::range<int>(int, int);
template Option& Option::range<double>(double, double);

Option& Option::positive() {
    o_->check(CLI::PositiveNumber);
    return *this;
}

Option& Option::non_negative() {
    o_->check(CLI::NonNegativeNumber);
    return *this;
}

Option& Option::existing_file() {
    o_->check(CLI::ExistingFile);
    return *this;
}

CommandLine::CommandLine(const std::string& description, const std::string& name)
    : app_(std::make_unique<CLI::App>(description, name)) {}

CommandLine::~CommandLine() = default;

void CommandLine::common(cli::CommonOptions& o) { cli::add_common(app_.get(), o); }

void CommandLine::timeline(cli::TimelineOptions& o, const std::string& tracks) {
    cli::add_timeline(app_.get(), o, tracks);
}

template <class T>
Option CommandLine::option(const std::string& names, T& value, const std::string& help) {
    return Option(app_->add_option(names, value, help));
}
// The value types the lab programs' options have.
template Option CommandLine::option<int>(const std::string&, int&, const std::string&);
template Option CommandLine::option<float>(const std::string&, float&, const std::string&);
template Option CommandLine::option<double>(const std::string&, double&, const std::string&);
template Option CommandLine::option<std::uint64_t>(const std::string&, std::uint64_t&, const std::string&);
template Option CommandLine::option<std::string>(const std::string&, std::string&, const std::string&);
template Option CommandLine::option<std::vector<int>>(const std::string&, std::vector<int>&, const std::string&);
template Option CommandLine::option<std::vector<double>>(const std::string&, std::vector<double>&,
                                                         const std::string&);
template Option CommandLine::option<std::vector<std::string>>(const std::string&, std::vector<std::string>&,
                                                              const std::string&);

Option CommandLine::flag(const std::string& names, bool& value, const std::string& help) {
    return Option(app_->add_flag(names, value, help));
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
    try {
        app_->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app_->exit(e);
        return rc == 0 ? 0 : 2;
    }
    return std::nullopt;
}

void CommandLine::parse_quietly(int argc, char** argv) {
    try {
        app_->parse(argc, argv);
    } catch (const CLI::ParseError&) {
    }
}

}  // namespace pd::lab
