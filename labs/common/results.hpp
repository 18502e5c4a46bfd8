// Where a lab program's results go: the folder for its CSV files and plots,
// and the head of its --json file, the same in every lab that has them.
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

}  // namespace pd::lab
