// Where a lab program's results go: the folder for its CSV files and plots,
// and its --json file with the head every lab gives it.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"

namespace pd::lab {

// Creates --out (and its parents) before anything is measured, so that a bad
// folder stops the lab at once with one message.
std::filesystem::path make_out_dir(const std::string& out);

// What was run and where: {"lab", "model", "precision", "device", "hardware",
// "threads" (OpenMP), "timing_method"}; the lab adds its own keys.
nlohmann::json run_json(const std::string& lab, const cli::CommonOptions& o, const Engine& e);

// Writes `j` to --json when it was given (invalid UTF-8 becomes U+FFFD).
void write_lab_json(const cli::CommonOptions& o, const nlohmann::json& j);

}  // namespace pd::lab
