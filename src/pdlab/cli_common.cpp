#include "cli_common.hpp"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "startup_load.hpp"

namespace pd::cli {

void add_workload(CLI::App* app, BenchOptions& b, const std::string& each, const std::string& seed_note) {
    app->add_option("--prompt-len,-P", b.prompt_len, "prompt tokens per sequence")->capture_default_str();
    app->add_option("--gen,-n", b.gen, "decode steps")->capture_default_str();
    app->add_option("--batch,-B", b.batch, "sequences decoded together")->capture_default_str();
    app->add_option("--warmup", b.warmup, "runs discarded first" + each)->capture_default_str();
    app->add_option("--repeats,-r", b.repeats, "measured runs" + each)->capture_default_str();
    app->add_option("--seed", b.seed, "seed of the random prompt" + seed_note)->capture_default_str();
}

void add_common(CLI::App* app, CommonOptions& o, bool with_json) {
    app->add_option("--model,-m", o.model, model_help())->capture_default_str();
    app->add_option("--threads,-t", o.threads,
                    "OpenMP threads for every kernel (default: the cores other work leaves free, "
                    "now " + default_threads_note() + "). Timings depend on it: report it with them.")
        ->check(CLI::Range(1, 1024).description("(1 to 1024)"));
    app->add_option("--precision", o.precision,
                    "f32: weights and math in float32. bf16: weights stored in bfloat16 (half the "
                    "bytes for decode to stream), products accumulated in float32. int8: weights "
                    "quantized at load to 8-bit integers with one float32 scale per --group-size "
                    "inputs (about a quarter of f32's bytes); CPU decode multiplies them by the inputs "
                    "rounded to 16-bit integers (one scale per group), GPU decode by the bfloat16 inputs "
                    "in float32; "
                    "prefill uses them dequantized to bfloat16 (on the GPU too, which keeps both "
                    "copies). int4: the same with 4-bit integers (-7 to 7, about an eighth of f32's "
                    "bytes; CPU only), lab 12's stretch.")
        ->check(CLI::IsMember(kPrecisionNames))
        ->capture_default_str();
    app->add_option("--group-size", o.group_size,
                    "int8 and int4 only: consecutive inputs of a weight row that share one scale "
                    "(max |w| / 127, or / 7 for int4). Smaller groups follow the weights more closely "
                    "and cost more scale bytes.")
        ->check(CLI::IsMember({32, 64, 128}))
        ->capture_default_str();
    app->add_option("--device", o.device,
                    "cpu, or cuda for the GPU backend (refused with a clear message where this "
                    "build or machine has none)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    app->add_option("--max-seq", o.max_seq,
                    "positions per sequence the KV cache holds (default: what the command needs, "
                    "e.g. prompt + new tokens; never more than the model's context)")
        ->check(CLI::Range(1, 1 << 30).description("(1 or more)"));
    if (with_json) app->add_option("--json", o.json, "also write the results to this JSON file");
}

void add_sampling(CLI::App* app, SamplerConfig& s, bool& greedy) {
    auto* greedy_flag = app->add_flag("--greedy", greedy, "always pick the most likely token (temperature 0)");
    app->add_option("--temperature", s.temperature, "sampling temperature; 0 means greedy")
        ->check(CLI::Range(0.0, 100.0).description("(0 to 100)"))->capture_default_str()->excludes(greedy_flag);
    app->add_option("--top-k", s.top_k, "sample among the k most likely tokens (0: all)")
        ->check(CLI::Range(0, 1 << 30).description("(0 or more)"))->capture_default_str();
    app->add_option("--top-p", s.top_p, "sample among the most likely tokens whose probability adds up to p")
        ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"))->capture_default_str();
    app->add_option("--seed", s.seed, "random seed: the same seed gives the same text")->capture_default_str();
}

void add_prompt(CLI::App* app, PromptOptions& p, bool required) {
    auto* text = app->add_option("--prompt,-p", p.text, "prompt text (tokenised with the model's tokenizer)");
    auto* ids = app->add_option("--prompt-ids", p.ids, "prompt as comma-separated token ids, e.g. 1,2,3");
    text->excludes(ids);
    ids->excludes(text);
    if (required) {
        app->callback([app]() {
            if (app->count("--prompt") + app->count("--prompt-ids") == 0)
                throw CLI::RequiredError("--prompt or --prompt-ids");
        });
    }
}

void apply_runtime(const CommonOptions& o) {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    // An unknown precision or group size, or a device that cannot run it, is refused before anything loads.
    check_device(parse_device(o.device), precision_of(o));
}

Precision precision_of(const CommonOptions& o) { return parse_precision(o.precision, o.group_size); }

Session load_session(const CommonOptions& o) {
    apply_runtime(o);
    Session s;
    s.settings = {environment_cuda_settings(), environment_huge_pages()};  // the one parse: a bad value is refused before the load
    // Only the engine --device names: a CPU run keeps no row-major copy of the matrices.
    const Device d = parse_device(o.device);
    s.loaded = load_model(o.model, precision_of(o), true,
                          {.cpu = d == Device::cpu, .cuda = d == Device::cuda, .huge_pages = s.settings.huge_pages});
    return s;
}

void start_engine(Session& s, const CommonOptions& o, int batch, std::int64_t positions) {
    const int context = s.loaded.model->config.max_seq_len;
    EngineOptions eo;
    eo.device = parse_device(o.device);
    eo.batch = batch;
    eo.max_seq = o.max_seq > 0 ? o.max_seq : int(std::clamp<std::int64_t>(positions, 0, context));
    eo.cuda = s.settings.cuda;
    s.engine = make_engine(s.loaded.model, eo);
}

Session open_session(const CommonOptions& o, int batch, int max_seq) {
    Session s = load_session(o);
    start_engine(s, o, batch, max_seq);
    return s;
}

std::vector<int> parse_ids(const std::string& list) {
    std::vector<int> ids;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        std::size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
        if (a == std::string::npos) fail("empty entry in the id list \"{}\"", list);
        item = item.substr(a, b - a + 1);
        try {
            std::size_t used = 0;
            long v = std::stol(item, &used);
            if (used != item.size()) throw std::invalid_argument(item);
            if (v < INT32_MIN || v > INT32_MAX) throw std::out_of_range(item);
            ids.push_back(int(v));
        } catch (const std::exception&) {
            fail("\"{}\" in the id list is not an integer token id (expected e.g. 1,2,3)", item);
        }
    }
    if (ids.empty()) fail("the id list is empty (expected e.g. 1,2,3)");
    return ids;
}

std::vector<int> prompt_ids(const PromptOptions& p, const Tokenizer& tok) {
    if (!p.ids.empty()) return parse_ids(p.ids);
    auto ids = tok.encode(p.text);
    if (ids.empty()) fail("the prompt is empty: give some text to --prompt");
    return ids;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
    std::ofstream out(path);
    if (!out) fail("cannot write {}: check that its folder exists and is writable", path);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace pd::cli
