// pdlab generate: stream a continuation of the prompt, with per-phase timings;
// with --draft, speculative decoding (src/engine/speculative.hpp).
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint_notes.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "engine/generate.hpp"
#include "engine/speculative.hpp"
#include "engine/stop_rule.hpp"
#include "timeline_option.hpp"

namespace pd::cli {

namespace {

struct GenerateCliOptions {
    CommonOptions common;
    PromptOptions prompt;
    TimelineOptions timeline;
    int n = 32;
    bool greedy = false, no_cache = false, ignore_eos = false, trace = false;
    SamplerConfig sampler{0.8f, 40, 0.95f, 42};
    std::string draft;        // --draft: speculative decoding with this model proposing
    int speculate = -1;       // --speculate: draft tokens per target pass (-1: not given, 4 with --draft)
};

// What `pdlab generate --help` says before the options.
constexpr const char* kGenerateAbout = R"(Generate text: prefill the prompt in one pass, then decode one token per step.
Prints the text as it is produced and the phase timings (prefill, TTFT, TPOT) on stderr.
Example: pdlab generate --prompt "Once upon a time" -n 40 --greedy)";

CLI::App* add_generate_options(CLI::App& app, GenerateCliOptions& o) {
    auto* sub = app.add_subcommand("generate", kGenerateAbout);
    add_common(sub, o.common);
    add_prompt(sub, o.prompt);
    sub->add_option("-n,--max-new-tokens", o.n, "tokens to generate")
        ->check(CLI::Range(0, 1 << 20).description("(0 or more)"))->capture_default_str();
    add_sampling(sub, o.sampler, o.greedy);
    sub->add_flag("--no-cache", o.no_cache,
                  "recompute the whole sequence every step instead of reading the KV cache "
                  "(same tokens, much slower: the cost the cache saves)");
    sub->add_flag("--ignore-eos", o.ignore_eos, "keep going past the end-of-text token");
    sub->add_flag("--trace", o.trace, "print the prefill/decode trace table after the text");
    sub->add_option("--draft", o.draft,
                    "speculative decoding: this smaller model, sharing --model's tokenizer, proposes "
                    "tokens that --model checks in one pass per round (e.g. --draft tiny-draft). "
                    "Greedy output is the same as without it, sampling keeps the same distribution; "
                    "the stats line says how many proposals were kept");
    sub->add_option("--speculate", o.speculate,
                    "with --draft: draft tokens proposed per target pass, 1 or more (default 4; the "
                    "prompt plus k must fit in the context)");
    add_timeline(sub, o.timeline,
                 "Track \"engine\": the prefill span, then one decode span per step (the layers inside).");
    return sub;
}

// The one-line summary on stderr: what ran, how many tokens, the phase timings.
void print_summary(const GenerateCliOptions& o, const Engine& engine, std::size_t prompt_tokens,
                   const GenerateResult& r, bool use_cache) {
    std::fprintf(stderr,
                 "[%s, %s, %s] prompt %zu tokens, generated %zu%s | prefill %.2f ms | TTFT %.2f ms | "
                 "TPOT %.2f ms | %s\n",
                 o.common.model.c_str(), o.common.precision.c_str(), device_name(engine.device()),
                 prompt_tokens, r.generated_ids.size(), r.stopped_at_eos ? " (stopped at eos)" : "",
                 r.prefill_ms, r.ttft_ms, r.tpot_ms, use_cache ? "KV cache on" : "no cache (recompute)");
}

nlohmann::json generate_json(const GenerateCliOptions& o, const Engine& engine, const Tokenizer& tok,
                             const GenerateResult& r, bool use_cache) {
    nlohmann::json j;
    j["model"] = o.common.model;
    j["precision"] = o.common.precision;
    j["device"] = device_name(engine.device());
    j["hardware"] = engine.hardware();
    j["use_cache"] = use_cache;
    j["prompt_ids"] = r.prompt_ids;
    j["generated_ids"] = r.generated_ids;
    j["prompt_text"] = o.prompt.text;
    j["text"] = tok.decode(r.generated_ids);
    j["stopped_at_eos"] = r.stopped_at_eos;
    j["timings"] = {{"prefill_ms", r.prefill_ms}, {"decode_ms", r.decode_ms},
                    {"ttft_ms", r.ttft_ms},       {"tpot_ms", r.tpot_ms},
                    {"total_ms", r.total_ms},     {"timing_method", engine.timing_method()}};
    return j;
}

// The --draft / --speculate combinations that make sense, before anything loads.
void check_speculate_flags(GenerateCliOptions& o) {
    if (o.draft.empty()) {
        if (o.speculate != -1) fail("--speculate {} needs a draft model: add --draft MODEL (e.g. tiny-draft)", o.speculate);
        return;
    }
    if (o.speculate == -1) o.speculate = 4;
    if (o.speculate < 1) fail("--speculate must be at least 1 draft token per target pass, got {}", o.speculate);
    if (o.no_cache || o.trace)
        fail("--draft cannot be combined with {}: speculative decoding rolls the KV cache back, and "
             "its rounds are not the prefill/decode trace; drop one of them", o.no_cache ? "--no-cache" : "--trace");
    if (!o.timeline.path.empty())
        fail("--timeline does not record speculative decoding yet (the draft's and the target's passes would "
             "share one track): drop --draft or --timeline");
}

// Streams each token's text to stdout as it is chosen (not an EOS token the run stops at).
std::function<void(int)> print_tokens(StreamDecoder& stream, const Config& c, bool stop_at_eos) {
    return [&stream, eos = eos_ids(c.eos_ids, stop_at_eos)](int id) {
        if (is_eos(eos, id)) return;
        std::fputs(stream.push(id).c_str(), stdout);
        std::fflush(stdout);
    };
}

void print_speculation(const GenerateCliOptions& o, const Engine& engine, std::size_t prompt_tokens,
                       const SpeculativeResult& r) {
    const SpeculativeStats& st = r.stats;
    const double n = double(r.generated_ids.size());
    std::fprintf(stderr,
                 "[%s + draft %s, %s, %s] prompt %zu tokens, generated %zu%s | speculate %d: acceptance "
                 "%.1f%% (%d of %d), %.2f tokens per target pass (%d passes) | draft %.2f ms, target "
                 "%.2f ms, prefill %.2f ms | %.1f tokens/s\n",
                 o.common.model.c_str(), o.draft.c_str(), o.common.precision.c_str(), device_name(engine.device()),
                 prompt_tokens, r.generated_ids.size(), r.stopped_at_eos ? " (stopped at eos)" : "", o.speculate,
                 100.0 * st.acceptance_rate(), st.accepted, st.proposed, r.tokens_per_target_pass(),
                 st.target_passes, st.draft_ms, st.target_ms, st.prefill_ms,
                 r.total_ms > 0 ? 1000.0 * n / r.total_ms : 0.0);
}

nlohmann::json speculative_json(const GenerateCliOptions& o, const Engine& engine, const Tokenizer& tok,
                                const std::vector<int>& prompt, const SpeculativeResult& r) {
    const SpeculativeStats& st = r.stats;
    return {{"model", o.common.model}, {"draft", o.draft}, {"speculate", o.speculate},
            {"precision", o.common.precision}, {"device", device_name(engine.device())},
            {"hardware", engine.hardware()}, {"prompt_ids", prompt}, {"generated_ids", r.generated_ids},
            {"prompt_text", o.prompt.text}, {"text", tok.decode(r.generated_ids)},
            {"stopped_at_eos", r.stopped_at_eos},
            {"speculation", {{"rounds", st.rounds}, {"proposed", st.proposed}, {"accepted", st.accepted},
                             {"acceptance_rate", st.acceptance_rate()}, {"target_passes", st.target_passes},
                             {"draft_passes", st.draft_passes},
                             {"tokens_per_target_pass", r.tokens_per_target_pass()}}},
            {"timings", {{"prefill_ms", st.prefill_ms}, {"draft_ms", st.draft_ms}, {"target_ms", st.target_ms},
                         {"rule_ms", st.rule_ms}, {"total_ms", r.total_ms},
                         {"timing_method", engine.timing_method()}}}};
}

// --draft: the same request through speculative_generate, with a second engine for the draft.
int run_speculative(const GenerateCliOptions& o, Session& s, const std::vector<int>& ids) {
    CommonOptions draft_options = o.common;  // the same device, precision and cache size
    draft_options.model = o.draft;
    Session d = load_session(draft_options);
    start_engine(d, draft_options, 1, generate_positions(ids.size(), o.n));
    SpeculativeOptions so;
    so.k = o.speculate;
    so.max_new_tokens = o.n;
    so.sampler = o.sampler;
    so.stop_at_eos = !o.ignore_eos;
    check_speculation(*s.engine, *d.engine, ids.size(), so);  // before any text is printed
    StreamDecoder stream(s.loaded.tokenizer);
    if (!o.prompt.text.empty()) std::fputs(o.prompt.text.c_str(), stdout);
    SpeculativeResult r = speculative_generate(*s.engine, *d.engine, ids, so, {},
                                               print_tokens(stream, s.engine->config(), so.stop_at_eos));
    std::fputs((stream.flush() + "\n").c_str(), stdout);
    std::fflush(stdout);
    print_speculation(o, *s.engine, ids.size(), r);
    if (!o.common.json.empty())
        write_json_file(o.common.json, speculative_json(o, *s.engine, s.loaded.tokenizer, ids, r));
    return 0;
}

int run_generate(GenerateCliOptions& o) {
    if (o.greedy) o.sampler.temperature = 0.0f;
    validate(o.sampler);
    check_speculate_flags(o);
    const auto timeline = open_timeline(o.timeline, o.common.device, "pdlab generate");
    if (timeline) timeline->timeline().name_track({1, 1}, "engine");
    Session s = load_session(o.common);
    note_generation_config(s.loaded);
    const Tokenizer& tok = s.loaded.tokenizer;
    std::vector<int> ids = prompt_ids(o.prompt, tok);
    start_engine(s, o.common, 1, generate_positions(ids.size(), o.n));
    if (!o.draft.empty()) return run_speculative(o, s, ids);
    GenerateOptions g;
    g.max_new_tokens = o.n;
    g.sampler = o.sampler;
    g.use_cache = !o.no_cache;
    g.stop_at_eos = !o.ignore_eos;
    StreamDecoder stream(tok);
    if (!o.prompt.text.empty()) std::fputs(o.prompt.text.c_str(), stdout);
    GenerateResult r = generate(*s.engine, ids, g, print_tokens(stream, s.engine->config(), g.stop_at_eos));
    std::fputs(stream.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    if (o.trace) std::fputs(format_trace(r.trace).c_str(), stdout);
    std::fflush(stdout);  // the summary goes to stderr: keep it after the text
    print_summary(o, *s.engine, ids.size(), r, g.use_cache);
    if (!o.common.json.empty()) write_json_file(o.common.json, generate_json(o, *s.engine, tok, r, g.use_cache));
    finish_timeline(timeline.get(), o.timeline.path);
    return 0;
}

}  // namespace

Command add_generate(CLI::App& app) { return options_command(app, add_generate_options, run_generate); }

}  // namespace pd::cli
