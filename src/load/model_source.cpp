#include "load/model_source.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "base/kit_root.hpp"
#include "base/timing.hpp"

namespace pd {

namespace fs = std::filesystem;

fs::path data_dir() {
    const fs::path root = kit_root();
    if (root.empty())
        fail("cannot find the kit's data/ folder ({}): run a program built in the kit's checkout, or set "
             "PDLAB_KIT to the kit's folder", kKitRootHelp);
    return root / "data";
}

std::string model_help() {
    return "MODEL is one of: tiny (the bundled trained model, the default), tiny-draft; "
           "synthetic:PRESET or synthetic:FAMILY,key=value,... (seeded random weights at a real "
           "size; " + synthetic_presets_help() + "); or the path of a Hugging Face folder holding "
           "config.json, model.safetensors (or sharded files with model.safetensors.index.json) "
           "and optionally tokenizer.json, of the GPT-2 or Llama family.";
}

namespace {

bool is_synthetic(const std::string& spec) { return spec.rfind("synthetic:", 0) == 0; }

fs::path resolve_folder(const std::string& spec) {
    if (spec == "tiny" || spec == "tiny-draft") {
        fs::path p = data_dir() / "models" / spec;
        std::error_code ec;
        if (!fs::exists(p / "config.json", ec))
            fail("the bundled model \"{}\" is missing at {}; retrain it with "
                 "tools/train/train.py (see data/models/tiny/README.md) or set PDLAB_KIT to the kit's folder",
                 spec, p.string());
        return p;
    }
    fs::path p(spec);
    std::error_code ec;
    if (!fs::exists(p, ec))
        fail("model \"{}\" not found: it is neither a bundled name nor an existing folder. {}",
             spec, model_help());
    if (!fs::is_directory(p, ec))
        fail("model \"{}\" is a file; give the folder that holds config.json and the "
             "safetensors files", spec);
    return p;
}

Tokenizer tokenizer_for(const fs::path& folder, const Config& c) {
    std::error_code ec;
    if (!folder.empty() && fs::exists(folder / "tokenizer.json", ec))
        return Tokenizer::from_json(folder / "tokenizer.json");
    return Tokenizer::bytes(c.vocab_size);
}

// A progress line that rewrites itself, only where a person is watching.
Progress progress_line(bool enabled, const std::string& what) {
    if (!enabled || !isatty(STDERR_FILENO)) return {};
    return [what](int done, int total) {
        std::fprintf(stderr, "\rloading %s: layer %d/%d", what.c_str(), done, total);
        if (done == total) std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    };
}

}  // namespace

LoadedModel load_model(const std::string& spec, Precision precision, bool progress, Backends serves) {
    LoadedModel out;
    out.source = spec;
    double t0 = now_ms();
    if (is_synthetic(spec)) {
        unsigned long long seed = 0;
        Config c = synthetic_config(spec.substr(10), seed);
        Weights w = synthetic_weights(c, precision, seed, progress_line(progress && c.n_params() > 50'000'000, spec));
        out.tokenizer = Tokenizer::bytes(c.vocab_size);
        out.model = std::make_shared<Model>(make_model(std::move(c), std::move(w), precision, serves));
    } else {
        out.folder = resolve_folder(spec);
        Config c = load_hf_config(out.folder / "config.json");
        c.name = spec;
        Checkpoint ck = Checkpoint::open(out.folder);
        out.file_bytes = ck.file_bytes();
        Weights w = load_weights(ck, c, precision, progress_line(progress && out.file_bytes > 100'000'000, spec));
        out.tokenizer = tokenizer_for(out.folder, c);
        out.model = std::make_shared<Model>(make_model(std::move(c), std::move(w), precision, serves));
    }
    out.load_ms = now_ms() - t0;
    return out;
}

Tokenizer load_tokenizer(const std::string& spec) {
    if (is_synthetic(spec)) {
        unsigned long long seed = 0;
        return Tokenizer::bytes(synthetic_config(spec.substr(10), seed).vocab_size);
    }
    fs::path folder = resolve_folder(spec);
    std::error_code ec;
    if (fs::exists(folder / "tokenizer.json", ec)) return Tokenizer::from_json(folder / "tokenizer.json");
    return Tokenizer::bytes(load_hf_config(folder / "config.json").vocab_size);
}

fs::path model_folder(const std::string& spec) {
    if (is_synthetic(spec))
        fail("{} is a synthetic model: it has no folder, no tokenizer_config.json and no chat template; "
             "give a bundled model or a checkpoint folder", spec);
    return resolve_folder(spec);
}

}  // namespace pd
