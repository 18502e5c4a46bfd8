// Lab 02: prefill and decode, traced and then measured.
//   1. The classic trace: a P-token prompt (P = 4 by default) and two greedy
//      output tokens, with the cache length and K/V shape after every pass.
//   2. The measurement recipe: fixed setup, warm-up runs, model-side prefill
//      time and per-step decode time over repeats, with statistics.
//   3. The same generation with and without the KV cache.
//   4. The filled-in report.
//   5. This device's row of the CPU-vs-GPU table (the program runs through Engine,
//      so --device cuda measures the GPU with the engine's synchronising timer).
// One function per section. Your harness (exercise.cpp) does the decoding, the
// timing recipe and the statistics.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "engine/generate.hpp"
#include "base/hardware.hpp"
#include "lab_main.hpp"
#include "print.hpp"
#include "timeline_option.hpp"
#include "engine/sampler.hpp"

using namespace pd;
namespace ex = pd::lab02;

namespace {

struct Options {
    cli::CommonOptions common;
    cli::TimelineOptions timeline;
    std::string prompt;
    int prompt_len = 4;
    int steps = 16;
    int warmup = 2;
    int repeats = 5;
    bool compare = true;
};

constexpr const char* kSentence = "One day, Lily went to the park. ";

// The prompt: --prompt as given, else the first P tokens of a repeated sentence.
std::vector<int> make_prompt(const Options& o, const Tokenizer& tok) {
    if (!o.prompt.empty()) {
        auto ids = tok.encode(o.prompt);
        if (ids.empty()) fail("--prompt gave no tokens");
        return ids;
    }
    if (o.prompt_len < 1) fail("--prompt-len must be at least 1, got {}", o.prompt_len);
    std::vector<int> ids;
    auto one = tok.encode(kSentence);
    while (int(ids.size()) < o.prompt_len) ids.insert(ids.end(), one.begin(), one.end());
    ids.resize(std::size_t(o.prompt_len));
    return ids;
}

// "t1, t2, t3, t4" for short prompts, "t1..t128" for long ones.
std::string prompt_names(int P) {
    if (P <= 6) {
        std::vector<std::string> n;
        for (int i = 1; i <= P; i++) n.push_back(fmt::format("t{}", i));
        return fmt::format("{}", fmt::join(n, ", "));
    }
    return fmt::format("t1..t{}", P);
}

std::string stats_line(const Stats& s) {
    return fmt::format("median {:.3f} ms, mean {:.3f} +/- {:.3f} (stdev), p90 {:.3f}, min {:.3f}, max {:.3f}, n={}",
                       s.median, s.mean, s.stdev, s.p90, s.min, s.max, s.n);
}

// What every section shares: the options, the engine, the prompt, the JSON.
struct Lab {
    const Options& o;
    Engine& engine;
    const Tokenizer& tok;
    std::vector<int> ids;  // (P) the prompt
    nlohmann::json js;
    std::string kv(int S) const {
        return fmt::format("[1, {}, {}, {}]", engine.config().n_kv_heads, S, engine.config().head_dim);
    }
    int P() const { return int(ids.size()); }
};

void print_trace_row(int step, const std::string& what, const std::string& tokens, const std::string& len,
                     const std::string& shape, const std::string& owner) {
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", step, what.c_str(), tokens.c_str(), len.c_str(),
                shape.c_str(), owner.c_str());
}

// Prefill, then two decode steps through the student's decode_loop (1 step each).
struct Trace {
    int g1, g2, g3, len_prefill, len_1, len_2;
};
Trace run_trace(Lab& lab) {
    Engine& engine = lab.engine;
    engine.reset(0);
    Trace t{};
    t.g1 = argmax(engine.prefill(0, lab.ids), engine.config().vocab_size);
    t.len_prefill = engine.cache_len(0);
    std::vector<double> ms;
    auto one_step = [&](int token) {
        std::vector<int> out = ex::decode_loop(engine, 0, token, 1, ms);
        if (out.size() != 1 || ms.size() != 1)
            fail("decode_loop(steps = 1) returned {} tokens and {} times; expected exactly 1 of each", out.size(),
                 ms.size());
        return out[0];
    };
    t.g2 = one_step(t.g1);
    t.len_1 = engine.cache_len(0);
    t.g3 = one_step(t.g2);
    t.len_2 = engine.cache_len(0);
    return t;
}

void print_trace(const Lab& lab, const Trace& t) {
    const int P = lab.P();
    const std::string tp = prompt_names(P), upto = P <= 6 ? tp : fmt::format("t1..t{}", P);
    std::printf("   %-4s %-52s %-22s %-13s %-16s %s\n", "Step", "What happens", "Prompt tokens", "Cache length",
                "K/V shape", "First-token ownership");
    print_trace_row(0, "prompt tokens available, nothing computed yet", tp, "-", "-", "-");
    print_trace_row(1, fmt::format("prefill: all {} tokens in ONE pass, K/V of all cached", P), tp,
                    fmt::format("P = {}", t.len_prefill), lab.kv(t.len_prefill),
                    fmt::format("t{}'s logits produce g1 (id {})", P, t.g1));
    print_trace_row(2, fmt::format("decode 1: feed g1; it attends to {} cached + its own", P), upto + ", g1",
                    fmt::format("P+1 = {}", t.len_1), lab.kv(t.len_1), fmt::format("g1's logits produce g2 (id {})", t.g2));
    print_trace_row(3, fmt::format("decode 2: feed g2; it attends to {} cached + its own", P + 1), upto + ", g1, g2",
                    fmt::format("P+2 = {}", t.len_2), lab.kv(t.len_2),
                    fmt::format("g2's logits produce the next output (id {})", t.g3));
    std::printf("   output g1 g2 g3 = ids [%d, %d, %d] = %s %s %s\n", t.g1, t.g2, t.g3,
                lab::quoted_token(lab.tok, t.g1).c_str(), lab::quoted_token(lab.tok, t.g2).c_str(),
                lab::quoted_token(lab.tok, t.g3).c_str());
    std::printf("   Shapes: prefill writes K/V %s in every layer; each decode step feeds one token id [B, 1] =\n"
                "   [1, 1] and writes new K/V [B, H_kv, 1, D] = %s, one more column of the cache.\n",
                lab.kv(P).c_str(), lab.kv(1).c_str());
    std::printf("   No extra pass produces output token 1: the prefill pass already ended with t%d's logits, which\n"
                "   chose g1. Decode step 1 CONSUMES g1 and produces g2. Cache: %d -> %d -> %d.\n", P, t.len_prefill,
                t.len_1, t.len_2);
}

// ---- 1. The trace: prefill, then two decode steps, with the student's decode_loop.
bool section_trace(Lab& lab) {
    const int P = lab.P();
    std::printf("1. The trace: a %d-token prompt and two greedy output tokens (B = 1)\n", P);
    std::string text;
    for (int i = 0; i < std::min(P, 8); i++) text += " " + lab::quoted_token(lab.tok, lab.ids[std::size_t(i)]);
    std::printf("   prompt %s = ids [%s] =%s%s\n", prompt_names(P).c_str(), lab::id_list(lab.ids).c_str(),
                text.c_str(), P > 8 ? " ..." : "");
    const Trace t = run_trace(lab);
    std::printf("   prefill ran: cache length %d; t%d's logits chose g1 = id %d. Decode steps 1 and 2 ran in your "
                "decode_loop.\n", t.len_prefill, P, t.g1);
    print_trace(lab, t);
    GenerateOptions g;
    g.max_new_tokens = 3;
    g.stop_at_eos = false;
    const bool lengths_ok = t.len_prefill == P && t.len_1 == P + 1 && t.len_2 == P + 2;
    const bool same = generate(lab.engine, lab.ids, g).generated_ids == std::vector<int>{t.g1, t.g2, t.g3};
    std::printf("   check: cache lengths %s; tokens %s the engine's own generate()\n\n",
                lengths_ok ? "P, P+1, P+2 as expected" : "WRONG (expected P, P+1, P+2)", same ? "match" : "DO NOT match");
    lab.js["trace"] = {{"prompt_ids", lab.ids}, {"output_ids", {t.g1, t.g2, t.g3}},
                       {"cache_lengths", {t.len_prefill, t.len_1, t.len_2}},
                       {"kv_shapes", {lab.kv(t.len_prefill), lab.kv(t.len_1), lab.kv(t.len_2)}},
                       {"ok", lengths_ok && same}};
    return lengths_ok && same;
}

// The fixed setup of section 2, also the report's first rows.
struct Setup {
    std::string hardware, software;
};
Setup describe_setup(const Engine& engine) {
    const std::string cuda = engine.device() == Device::cpu
                                 ? "CUDA none (CPU run)"
                                 : "CUDA backend (this engine does not report its CUDA version: see nvidia-smi)";
    Setup s;
    s.software = fmt::format("{}, {}, {}, {}", compiler_version(), onednn_version(), openmp_version(), cuda);
    s.hardware = fmt::format("{}, {} cores, {:.1f} GiB memory", cpu_model(), cpu_cores(), memory_gib());
    if (engine.device() == Device::cpu) s.hardware += fmt::format(", OpenMP threads: {}", omp_get_max_threads());
    else s.hardware += fmt::format("; GPU: {}", engine.hardware());
    return s;
}

void print_setup(const Lab& lab, const Setup& s) {
    const Options& o = lab.o;
    auto row = [](const char* k, const std::string& v) { std::printf("   %-17s %s\n", k, v.c_str()); };
    std::printf("2. Measuring the two phases (your time_one_run, measure, stats_of, per_step_series)\n   Fixed setup\n");
    row("model", o.common.model);
    row("hardware", s.hardware);
    row("software", s.software);
    row("precision", o.common.precision);
    row("batch size B", "1");
    row("prompt length P", std::to_string(lab.P()));
    row("output length", fmt::format("{} tokens: 1 from prefill + {} decode steps", o.steps + 1, o.steps));
    row("cache setting", "use_cache on (off is compared in section 3)");
    row("warm-up runs", fmt::format("{}, discarded", o.warmup));
    row("measured runs", std::to_string(o.repeats));
    row("timing", lab.engine.timing_method());
}

// The numbers sections 2, 4 and 5 print.
struct Results {
    Stats prefill, decode, whole;
    int final_len = 0;
    bool len_ok = false;
};

void print_series(const std::vector<Stats>& series) {
    std::printf("   per-step median by step (the cache grows by one each step):\n     ");
    const int steps = int(series.size());
    for (int i = 0; i < steps; i++) {
        if (steps > 12 && i == 6) {
            std::printf("...  ");
            i = steps - 6;
        }
        std::printf("%d: %.3f  ", i + 1, series[std::size_t(i)].median);
    }
    std::printf("\n");
}

// ---- 2. The measurement recipe, run by the student's harness.
Results section_measure(Lab& lab, const Setup& setup) {
    print_setup(lab, setup);
    const Options& o = lab.o;
    const ex::Measurement m = ex::measure(lab.engine, 0, lab.ids, ex::Recipe{o.warmup, o.repeats, o.steps});
    std::vector<double> prefill_ms, step_ms_all, run_ms;
    for (const ex::RunTimes& run : m.runs) {
        prefill_ms.push_back(run.prefill_ms);
        step_ms_all.insert(step_ms_all.end(), run.step_ms.begin(), run.step_ms.end());
        run_ms.push_back(std::accumulate(run.step_ms.begin(), run.step_ms.end(), run.prefill_ms));
    }
    Results r{ex::stats_of(prefill_ms), ex::stats_of(step_ms_all), ex::stats_of(run_ms)};
    const int P = lab.P();
    std::printf("\n   Results (model-side, over %d measured runs)\n", o.repeats);
    std::printf("   prefill, %d tokens in one pass:   %s\n", P, stats_line(r.prefill).c_str());
    std::printf("   decode, one token per step:      %s\n", stats_line(r.decode).c_str());
    std::printf("   prefill + %d steps:               median %.3f ms\n", o.steps, r.whole.median);
    std::printf("   throughput: prefill %.0f tokens/s, decode %.0f tokens/s (median times)\n",
                1000.0 * P / r.prefill.median, 1000.0 / r.decode.median);
    print_series(ex::per_step_series(m));
    r.final_len = lab.engine.cache_len(0);
    r.len_ok = r.final_len == P + o.steps;
    std::printf("   final cache length %d, expected P + steps = %d + %d: %s\n", r.final_len, P, o.steps,
                r.len_ok ? "ok" : "WRONG");
    std::printf("   tokens identical in every run: %s\n\n", m.same_tokens ? "yes" : "NO");
    lab.js["prefill_ms"] = prefill_ms;
    lab.js["decode_step_ms"] = step_ms_all;
    return r;
}

double total_ms(const GenerateResult& r) {
    double t = 0;
    for (const TraceRow& row : r.trace) t += row.ms;
    return t;
}

// ---- 3. With and without the KV cache, through the engine's generate().
GenerateResult section_use_cache(Lab& lab) {
    GenerateOptions g;
    g.max_new_tokens = lab.o.steps + 1;
    g.stop_at_eos = false;
    generate(lab.engine, lab.ids, g);  // warm-up
    GenerateResult with = generate(lab.engine, lab.ids, g);
    g.use_cache = false;
    GenerateResult without = generate(lab.engine, lab.ids, g);
    std::printf("3. use_cache on vs off: %d output tokens with generate()\n", lab.o.steps + 1);
    std::printf("   %-14s %10s %10s   %-14s %10s %10s\n", "with cache", "tokens in", "ms", "without cache",
                "tokens in", "ms");
    for (std::size_t i = 0; i < with.trace.size(); i++) {
        if (with.trace.size() > 12 && i == 5) {
            std::printf("   ...\n");
            i = with.trace.size() - 4;
        }
        const TraceRow &a = with.trace[i], &b = without.trace[i];
        std::printf("   %-14s %10d %10.3f   %-14s %10d %10.3f\n", a.phase.c_str(), a.tokens_in, a.ms, b.phase.c_str(),
                    b.tokens_in, b.ms);
    }
    const double tw = total_ms(with), tn = total_ms(without);
    const bool same = with.generated_ids == without.generated_ids;
    std::printf("   total model time: %.3f ms with the cache, %.3f ms without (%.1fx); same tokens: %s\n", tw, tn,
                tn / tw, same ? "yes" : "NO");
    std::printf("   Without the cache every step reruns the whole sequence so far (P + i tokens); with it, a\n"
                "   step runs one token and reads the others' K/V from the cache.\n\n");
    lab.js["use_cache"] = {{"with_ms", tw}, {"without_ms", tn}, {"same_tokens", same}, {"with_ttft_ms", with.ttft_ms},
                           {"with_tpot_ms", with.tpot_ms}};
    return with;
}

// ---- 4. The report.
void section_report(Lab& lab, const Setup& setup, const Results& r, const GenerateResult* with) {
    const Options& o = lab.o;
    const Config& c = lab.engine.config();
    auto line = [](const char* k, const std::string& v) { std::printf("   %-30s %s\n", k, v.c_str()); };
    std::printf("4. Report\n");
    line("Model", fmt::format("{} ({}, {} layers, {} heads, {} KV heads)", o.common.model, family_name(c.family),
                              c.n_layers, c.n_heads, c.n_kv_heads));
    line("Hardware", setup.hardware);
    line("Software stack", setup.software);
    line("Precision", o.common.precision);
    line("Batch size B", "1");
    line("Prompt length P", std::to_string(lab.P()));
    line("Output length", fmt::format("{} tokens ({} decode steps)", o.steps + 1, o.steps));
    line("Warm-up runs", std::to_string(o.warmup));
    line("Measured runs", std::to_string(o.repeats));
    line("Prefill time (ms)", fmt::format("median {:.3f}, mean {:.3f} +/- {:.3f}", r.prefill.median, r.prefill.mean,
                                          r.prefill.stdev));
    line("Per-step decode (ms, median)", fmt::format("{:.3f} (mean {:.3f} +/- {:.3f}, p90 {:.3f}, n={})",
                                                     r.decode.median, r.decode.mean, r.decode.stdev, r.decode.p90,
                                                     r.decode.n));
    // TTFT and the prefill it contains from the SAME run (section 3's): the
    // median above comes from other runs, and one run's prefill can be faster
    // than their median, so TTFT beside the median can even look smaller.
    if (with)
        line("TTFT from generate() (ms)",
             fmt::format("{:.3f} in one run = its prefill {:.3f} + {:.3f} around it (choosing the token, "
                         "the clock): TTFT != prefill time", with->ttft_ms, with->prefill_ms,
                         with->ttft_ms - with->prefill_ms));
    line("Final cache length", fmt::format("{} (P + steps = {}: {})", r.final_len, lab.P() + o.steps,
                                           r.len_ok ? "ok" : "WRONG"));
    line("Device, sync method", fmt::format("{}: {}", device_name(lab.engine.device()), lab.engine.timing_method()));
    std::printf("   (These are measurements of THIS machine, now: other programs running on it show up as\n"
                "   spread. Report the median and the spread, never one run.)\n\n");
}

// ---- 5. One row of the handout's CPU-vs-GPU table: this device's numbers.
void section_device_row(Lab& lab, const Results& r) {
    const bool on_gpu = lab.engine.device() == Device::cuda;
    std::printf("5. Your row of the CPU-vs-GPU table (%s)\n", on_gpu ? "GPU" : "CPU");
    std::printf("   | device | prefill ms (median) | prefill tok/s | decode ms/step (median) | decode tok/s |\n");
    std::printf("   | %s | %.3f | %.0f | %.3f | %.0f |\n", device_name(lab.engine.device()), r.prefill.median,
                1000.0 * lab.P() / r.prefill.median, r.decode.median, 1000.0 / r.decode.median);
    std::string why_not;
    if (on_gpu) std::printf("   The CPU row: the same command with --device cpu, or ./kit compare 02.\n");
    else if (cuda_available(&why_not))
        std::printf("   The GPU row: the same command with --device cuda, or ./kit compare 02 for both.\n");
    else
        std::printf("   The GPU row: no GPU here. On a machine with one, run this command with --device cuda,\n"
                    "   or ./kit compare 02 for both rows. (Why not here: %s)\n", why_not.c_str());
}

void write_json(Lab& lab, const Setup& setup, const Results& r) {
    const Options& o = lab.o;
    nlohmann::json& js = lab.js;
    js["model"] = o.common.model;
    js["hardware"] = setup.hardware;
    js["software"] = setup.software;
    js["precision"] = o.common.precision;
    js["device"] = device_name(lab.engine.device());
    js["batch"] = 1;
    js["prompt_len"] = lab.P();
    js["decode_steps"] = o.steps;
    js["warmup"] = o.warmup;
    js["repeats"] = o.repeats;
    js["prefill_ms_median"] = r.prefill.median;
    js["prefill_ms_mean"] = r.prefill.mean;
    js["prefill_ms_stdev"] = r.prefill.stdev;
    js["decode_ms_median"] = r.decode.median;
    js["decode_ms_mean"] = r.decode.mean;
    js["decode_ms_stdev"] = r.decode.stdev;
    js["decode_ms_p90"] = r.decode.p90;
    js["final_cache_len"] = r.final_len;
    js["final_cache_len_ok"] = r.len_ok;
    js["timing_method"] = lab.engine.timing_method();
    lab::write_lab_json(o.common, js);
}

void check_options(const Options& o) {
    if (o.steps < 2) fail("--steps must be at least 2 (the trace needs two decode steps), got {}", o.steps);
    if (o.warmup < 0) fail("--warmup must be >= 0, got {}", o.warmup);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
}

int run(const Options& o) {
    check_options(o);
    const auto timeline = cli::open_timeline(o.timeline, o.common.device, "lab 02");
    if (timeline) timeline->timeline().name_track({1, 1}, "engine");
    cli::Session s = cli::open_session(o.common);
    Lab lab{o, *s.engine, s.loaded.tokenizer, make_prompt(o, s.loaded.tokenizer), {}};
    if (lab.P() + o.steps + 1 > lab.engine.max_seq())
        fail("the prompt ({} tokens) plus {} decode steps do not fit the context of {} positions", lab.P(), o.steps,
             lab.engine.max_seq());
    const Config& c = lab.engine.config();
    std::printf("Lab 02: prefill and decode\n");
    std::printf("model %s (%s): %d layers, %d query heads, %d KV heads, head_dim %d; the cache holds K and V\n"
                "of shape [B, H_kv, S, D] in every layer\n\n", o.common.model.c_str(), family_name(c.family),
                c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim);
    const bool trace_ok = section_trace(lab);
    const Setup setup = describe_setup(lab.engine);
    const Results r = section_measure(lab, setup);
    std::optional<GenerateResult> with;
    if (o.compare) with = section_use_cache(lab);
    section_report(lab, setup, r, with ? &*with : nullptr);
    section_device_row(lab, r);
    write_json(lab, setup, r);
    cli::finish_timeline(timeline.get(), o.timeline.path);
    return lab::finish(trace_ok && r.len_ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    // Its cache is [B, 8, S, 64], the shapes of the classic trace. Random weights
    // often pick one token again and again; seed 6 gives three different ones
    // for the default prompt, so the trace shows which logits own which token.
    o.common.model = "synthetic:mha-h8-d64,seed=6";
    CLI::App app{
        "Lab 02: prefill and decode.\n"
        "1. Traces a P-token prompt (P = 4 by default) and two greedy output tokens: what each pass\n"
        "   consumes, the cache length and K/V shape [B, H_kv, S, D] after it, and which position's\n"
        "   logits produce each output token. Prefill produces output token 1; no extra pass does.\n"
        "2. Measures the two phases the careful way: fixed setup, warm-up runs thrown away, model-side\n"
        "   prefill time and per-step decode time over repeated runs, median/mean/stdev.\n"
        "3. Generates the same tokens with and without the KV cache and times both.\n"
        "4. Prints the filled-in report.\n"
        "5. Prints this device's row of the CPU-vs-GPU table (--device cuda for the GPU row).\n"
        "Your harness (exercise.cpp) does the decoding, the recipe and the statistics; test it\n"
        "with  meson test -C build --suite track1-02",
        "02-prefill-and-decode"};
    cli::add_common(&app, o.common);
    app.add_option("--prompt,-p", o.prompt, "prompt text (default: the first --prompt-len tokens of a fixed sentence)");
    app.add_option("--prompt-len,-P", o.prompt_len, "prompt length P when --prompt is not given")->capture_default_str();
    app.add_option("--steps,-n", o.steps, "decode steps timed per run (output length = steps + 1)")->capture_default_str();
    app.add_option("--warmup", o.warmup, "runs before measuring, thrown away (first-run costs: kernel setup, caches)")
        ->capture_default_str();
    app.add_option("--repeats,-r", o.repeats, "measured runs")->capture_default_str();
    app.add_flag("!--no-compare", o.compare, "skip section 3 (generation without the cache)");
    cli::add_timeline(&app, o.timeline,
                      "Track \"engine\": every prefill and decode pass of every section (the layers inside).");
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
