#include "results.hpp"

#include <omp.h>

#include <system_error>

#include <nlohmann/json.hpp>

namespace pd::lab {

std::filesystem::path make_out_dir(const std::string& out) {
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec || !std::filesystem::is_directory(out)) fail("cannot create the output folder {}: {}", out, ec.message());
    return out;
}

nlohmann::json run_json(const std::string& lab, const cli::CommonOptions& o, const Engine& e) {
    return {{"lab", lab},
            {"model", o.model},
            {"precision", o.precision},
            {"device", device_name(e.device())},
            {"hardware", e.hardware()},
            {"threads", omp_get_max_threads()},
            {"timing_method", e.timing_method()}};
}

void write_lab_json(const cli::CommonOptions& o, const nlohmann::json& j) {
    if (!o.json.empty()) cli::write_json_file(o.json, j);
}

}  // namespace pd::lab
