// Options every pdlab subcommand shares, and the helpers that act on them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/bench.hpp"
#include "engine/engine.hpp"
#include "engine/engine_settings.hpp"
#include "engine/sampler.hpp"
#include "load/model_source.hpp"
#include "cli_fwd.hpp"

namespace pd::cli {

// The names --precision takes, one per format row (precision.cpp; parse_precision
// also reads a few aliases, e.g. fp32): the option's check and bench's comma list.
inline const std::vector<std::string> kPrecisionNames = format_names();

struct CommonOptions {
    std::string model = "tiny";
    int threads = 0;                 // 0: the default startup_load.hpp chose
    std::string precision = "f32";
    int group_size = 64;             // --group-size: inputs per int8 or int4 scale
    std::string device = "cpu";
    std::string json;                // write machine-readable results here
    int max_seq = 0;                 // --max-seq: cache positions per sequence (0: what the command needs)
};

// --model, --threads, --precision, --group-size, --device, --max-seq (and --json when `with_json`).
void add_common(CLI::App* app, CommonOptions& o, bool with_json = true);

// The workload flags bench and compare share: -P, -n, -B, --warmup, -r, --seed.
// `each` ends the help of the per-run flags (compare: ", on each device");
// `seed_note` ends --seed's (compare: " (the same on both)").
void add_workload(CLI::App* app, BenchOptions& b, const std::string& each = "", const std::string& seed_note = "");

// --greedy, --temperature, --top-k, --top-p, --seed (generate and chat).
void add_sampling(CLI::App* app, SamplerConfig& s, bool& greedy);

// Prompt given as text or as ids.
struct PromptOptions {
    std::string text;
    std::string ids;                 // "1,2,3"
};
void add_prompt(CLI::App* app, PromptOptions& p, bool required = true);

// Sets the OpenMP thread count; checks the device and precision early.
void apply_runtime(const CommonOptions& o);

// --precision with --group-size, as the engine takes it.
Precision precision_of(const CommonOptions& o);

struct Session {
    EngineSettings settings;  // from the environment, read once by load_session (engine_settings.hpp)
    LoadedModel loaded;
    std::unique_ptr<Engine> engine;
};
// Loads --model in --precision; no engine yet (a command sizes its cache once
// it knows the request, e.g. after tokenising the prompt).
Session load_session(const CommonOptions& o);

// Builds the engine for --device with a cache of `batch` sequences of
// `positions` each (64-bit: P + n can overflow an int): --max-seq when given,
// else `positions` (0: the model's whole context). Never more than the context.
void start_engine(Session& s, const CommonOptions& o, int batch, std::int64_t positions);

// load_session + start_engine.
Session open_session(const CommonOptions& o, int batch = 1, int max_seq = 0);

// "1, 2,3" -> {1, 2, 3}; fails with a message on anything else.
std::vector<int> parse_ids(const std::string& list);
// The prompt's ids: tokenised text, or the parsed list.
std::vector<int> prompt_ids(const PromptOptions& p, const Tokenizer& tok);

// Writes pretty JSON to `path` (fails with a message if it cannot). Text that is
// not valid UTF-8 (a token can end inside a character) is written with U+FFFD.
void write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace pd::cli
