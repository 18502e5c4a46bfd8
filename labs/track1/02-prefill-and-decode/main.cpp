// Lab 02: prefill and decode, traced and then measured.
//   1. The classic trace: a P-token prompt (P = 4 by default) and two greedy
//      output tokens, with the cache length and K/V shape after every pass.
//   2. The measurement recipe: fixed setup, warm-up runs, model-side prefill
//      time and per-step decode time over repeats, with statistics.
//   3. The same generation with and without the KV cache.
//   4. The filled-in report.
//   5. This device's row of the CPU-vs-GPU table (the program runs through Engine,
//      so --device cuda measures the GPU with the engine's synchronising timer).
// One function per section (lab02.hpp says which file holds it). Your harness
// (exercise.cpp) does the decoding, the timing recipe and the statistics.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "base/hardware.hpp"
#include "lab02.hpp"
#include "lab_main.hpp"

using namespace pd;
using namespace pd::lab02;
namespace ex = pd::lab02;

namespace {

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

std::string stats_line(const Stats& s) {
    return fmt::format("median {:.3f} ms, mean {:.3f} +/- {:.3f} (stdev), p90 {:.3f}, min {:.3f}, max {:.3f}, n={}",
                       s.median, s.mean, s.stdev, s.p90, s.min, s.max, s.n);
}

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
    lab::CommandLine cl{
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
    cl.common(o.common);
    cl.option("--prompt,-p", o.prompt, "prompt text (default: the first --prompt-len tokens of a fixed sentence)");
    cl.option("--prompt-len,-P", o.prompt_len, "prompt length P when --prompt is not given").show_default();
    cl.option("--steps,-n", o.steps, "decode steps timed per run (output length = steps + 1)").show_default();
    cl.option("--warmup", o.warmup, "runs before measuring, thrown away (first-run costs: kernel setup, caches)")
        .show_default();
    cl.option("--repeats,-r", o.repeats, "measured runs").show_default();
    cl.flag("!--no-compare", o.compare, "skip section 3 (generation without the cache)");
    cl.timeline(o.timeline,
                "Track \"engine\": every prefill and decode pass of every section (the layers inside).");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
