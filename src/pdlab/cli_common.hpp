// Options every pdlab subcommand shares, and the helpers that act on them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine.hpp"
#include "model_source.hpp"

namespace pd::cli {

struct CommonOptions {
    std::string model = "tiny";
    int threads = 0;                 // 0: all cores
    std::string precision = "f32";
    std::string device = "cpu";
    std::string json;                // write machine-readable results here
};

// --model, --threads, --precision, --device (and --json when `with_json`).
void add_common(CLI::App* app, CommonOptions& o, bool with_json = true);

// Prompt given as text or as ids.
struct PromptOptions {
    std::string text;
    std::string ids;                 // "1,2,3"
};
void add_prompt(CLI::App* app, PromptOptions& p, bool required = true);

// Sets the OpenMP thread count; checks the device and precision early.
void apply_runtime(const CommonOptions& o);

struct Session {
    LoadedModel loaded;
    std::unique_ptr<Engine> engine;
};
// Loads --model in --precision and builds the engine for --device.
Session open_session(const CommonOptions& o, int batch = 1, int max_seq = 0);

// "1, 2,3" -> {1, 2, 3}; fails with a message on anything else.
std::vector<int> parse_ids(const std::string& list);
// The prompt's ids: tokenised text, or the parsed list.
std::vector<int> prompt_ids(const PromptOptions& p, const Tokenizer& tok);

// Writes pretty JSON to `path` (fails with a message if it cannot). Text that is
// not valid UTF-8 (a token can end inside a character) is written with U+FFFD.
void write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace pd::cli
