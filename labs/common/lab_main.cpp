#include "lab_main.hpp"

#include <omp.h>

#include <cstdio>
#include <fstream>

#include "todo_exercise.hpp"

namespace pd::lab {

NotImplemented::NotImplemented(std::string f, std::string fn, std::string h)
    : std::logic_error(fn + " is not implemented yet"), file(std::move(f)), function(std::move(fn)),
      hint(std::move(h)) {}

void add_lab_options(CLI::App& app, LabOptions& o) {
    app.add_option("--model,-m", o.model, model_help())->capture_default_str();
    app.add_option("--threads,-t", o.threads, "OpenMP threads (default: all cores)")
        ->check(CLI::Range(1, 1024).description("(1 to 1024)"));
    app.add_option("--precision", o.precision, "f32 or bf16 weights")
        ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
    app.add_option("--device", o.device, "cpu, or cuda for the GPU backend")
        ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
    app.add_option("--json", o.json, "also write the lab's results to this JSON file");
}

LabSession open_lab_session(const LabOptions& o, int batch, int max_seq) {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    LabSession s;
    EngineOptions eo;
    eo.device = parse_device(o.device);
    eo.batch = batch;
    eo.max_seq = max_seq;
    std::string why;
    if (eo.device == Device::cuda && !cuda_available(&why))
        fail("--device cuda is not available: {}. Use --device cpu.", why);
    s.loaded = load_model(o.model, parse_precision(o.precision));
    s.engine = make_engine(s.loaded.model, eo);
    return s;
}

int run_lab(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    try {
        return body();
    } catch (const NotImplemented& e) {
        std::fprintf(stderr,
                     "\nExercise not implemented yet: %s\n  in %s\n  hint: %s\n"
                     "Implement it, rebuild (./kit build) and run this lab again; its tests\n"
                     "(meson test -C build --suite <lab>) tell you when it is right.\n",
                     e.function.c_str(), e.file.c_str(), e.hint.c_str());
        return 3;
    } catch (const UserError& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
}

void write_lab_json(const LabOptions& o, const nlohmann::json& j) {
    if (o.json.empty()) return;
    std::ofstream out(o.json);
    if (!out) fail("cannot write {}: check that its folder exists", o.json);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace pd::lab
