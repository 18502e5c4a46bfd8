// Resolving --model: the bundled models, seeded synthetic ones, or a Hugging
// Face checkpoint folder.
//   tiny, tiny-draft        data/models/<name>/ in the kit
//   synthetic:SPEC          seeded random weights (see synthetic_presets_help())
//   PATH                    a folder with config.json, *.safetensors, tokenizer.json
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "engine/model.hpp"
#include "io/tokenizer.hpp"

namespace pd {

struct LoadedModel {
    std::shared_ptr<const Model> model;
    Tokenizer tokenizer = Tokenizer::bytes(256);  // replaced by the model's own
    std::string source;            // what --model named
    std::filesystem::path folder;  // empty for synthetic models
    double load_ms = 0;            // reading or making the weights, and packing them for the CPU
    std::size_t file_bytes = 0;    // checkpoint bytes read (0 for synthetic)
};

// The kit's data/ folder: kit_root()'s data/ (base/kit_root.hpp). UserError where there is none.
std::filesystem::path data_dir();

// One --help paragraph describing the accepted forms.
std::string model_help();

// Loads the model for the engines in `serves` (make_model); shows a progress
// line on stderr for large checkpoints when `progress` is set and stderr is a
// terminal.
LoadedModel load_model(const std::string& spec, Precision precision, bool progress = true,
                       Backends serves = {});

// Just the tokenizer of a model (no weights read): for tokenize/detokenize.
Tokenizer load_tokenizer(const std::string& spec);

// The folder --model names (a bundled model's, or the path), for the files
// beside the weights (tokenizer_config.json). UserError for a synthetic model,
// which has no folder.
std::filesystem::path model_folder(const std::string& spec);

}  // namespace pd
