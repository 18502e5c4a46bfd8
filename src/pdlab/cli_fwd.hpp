// CLI11's App and Option, declared for the headers that take them: parsing
// CLI11 is most of a file's compile time, so only the files that build a
// command line include <CLI/CLI.hpp>, not every file that reads the options.
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
