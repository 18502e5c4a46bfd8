// What every lab program shares: the common options (--model, --threads,
// --precision, --device, --json) and a main() wrapper that turns errors into
// one clear message and an exit code:
//   0 ok, 1 a check the lab makes on its own results failed, 2 bad input (UserError
//   or a bad option), 3 an exercise is not implemented yet.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine.hpp"
#include "model_source.hpp"

namespace pd::lab {

struct LabOptions {
    std::string model = "tiny";
    int threads = 0;
    std::string precision = "f32";
    std::string device = "cpu";
    std::string json;
};

void add_lab_options(CLI::App& app, LabOptions& o);

struct LabSession {
    LoadedModel loaded;
    std::unique_ptr<Engine> engine;
};
// Applies --threads and loads --model on --device.
LabSession open_lab_session(const LabOptions& o, int batch = 1, int max_seq = 0);

// Parses argv with `app`, then runs `body`, mapping errors to exit codes.
int run_lab(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Writes `j` to o.json when it was given (invalid UTF-8 becomes U+FFFD).
void write_lab_json(const LabOptions& o, const nlohmann::json& j);

}  // namespace pd::lab
