// Lab 02: prefill and decode, traced and then measured.
//   1. The classic trace: a P-token prompt (P = 4 by default) and two greedy
//      output tokens, with the cache length and K/V shape after every pass.
//   2. The measurement recipe: fixed setup, warm-up runs, model-side prefill
//      time and per-step decode time over repeats, with statistics.
//   3. The same generation with and without the KV cache.
//   4. The filled-in report.
// Your decode_loop() and stats_of() (exercise.cpp) do the decoding and the statistics.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "generate.hpp"
#include "hardware.hpp"
#include "lab_main.hpp"
#include "print.hpp"
#include "sampler.hpp"

using namespace pd;
namespace ex = pd::lab02;

namespace {

struct Options {
    cli::CommonOptions common;
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

int run(const Options& o) {
    if (o.steps < 2) fail("--steps must be at least 2 (the trace needs two decode steps), got {}", o.steps);
    if (o.warmup < 0) fail("--warmup must be >= 0, got {}", o.warmup);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    cli::Session s = cli::open_session(o.common);
    Engine& engine = *s.engine;
    const Config& c = engine.config();
    const Tokenizer& tok = s.loaded.tokenizer;
    const int V = c.vocab_size, Hkv = c.n_kv_heads, D = c.head_dim;
    std::vector<int> ids = make_prompt(o, tok);
    const int P = int(ids.size());
    if (P + o.steps + 1 > engine.max_seq())
        fail("the prompt ({} tokens) plus {} decode steps do not fit the context of {} positions", P, o.steps,
             engine.max_seq());
    auto kv = [&](int S) { return fmt::format("[1, {}, {}, {}]", Hkv, S, D); };
    nlohmann::json js;

    std::printf("Lab 02: prefill and decode\n");
    std::printf("model %s (%s): %d layers, %d query heads, %d KV heads, head_dim %d; the cache holds K and V\n"
                "of shape [B, H_kv, S, D] in every layer\n\n", o.common.model.c_str(), family_name(c.family),
                c.n_layers, c.n_heads, Hkv, D);

    // ---- 1. The trace: prefill, then two decode steps, with the student's decode_loop.
    std::printf("1. The trace: a %d-token prompt and two greedy output tokens (B = 1)\n", P);
    {
        std::string text;
        for (int i = 0; i < std::min(P, 8); i++) text += " " + lab::quoted_token(tok, ids[std::size_t(i)]);
        std::printf("   prompt %s = ids [%s] =%s%s\n", prompt_names(P).c_str(),
                    lab::id_list(ids).c_str(), text.c_str(), P > 8 ? " ..." : "");
    }
    engine.reset(0);
    const float* logits = engine.prefill(0, ids);
    const int g1 = argmax(logits, V);
    const int len_prefill = engine.cache_len(0);
    std::printf("   prefill ran: cache length %d; t%d's logits chose g1 = id %d. Decode steps 1 and 2 run in your "
                "decode_loop.\n", len_prefill, P, g1);
    std::vector<double> ms;
    auto one_step = [&](int token) {
        std::vector<int> out = ex::decode_loop(engine, 0, token, 1, ms);
        if (out.size() != 1 || ms.size() != 1)
            fail("decode_loop(steps = 1) returned {} tokens and {} times; expected exactly 1 of each", out.size(),
                 ms.size());
        return out[0];
    };
    const int g2 = one_step(g1);
    const int len_1 = engine.cache_len(0);
    const int g3 = one_step(g2);
    const int len_2 = engine.cache_len(0);

    std::printf("   %-4s %-52s %-22s %-13s %-16s %s\n", "Step", "What happens", "Prompt tokens", "Cache length",
                "K/V shape", "First-token ownership");
    const std::string tp = prompt_names(P);
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", 0, "prompt tokens available, nothing computed yet",
                tp.c_str(), "-", "-", "-");
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", 1,
                fmt::format("prefill: all {} tokens in ONE pass, K/V of all cached", P).c_str(), tp.c_str(),
                fmt::format("P = {}", len_prefill).c_str(), kv(len_prefill).c_str(),
                fmt::format("t{}'s logits produce g1 (id {})", P, g1).c_str());
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", 2,
                fmt::format("decode 1: feed g1; it attends to {} cached + its own", P).c_str(),
                (P <= 6 ? tp + ", g1" : fmt::format("t1..t{}, g1", P)).c_str(),
                fmt::format("P+1 = {}", len_1).c_str(), kv(len_1).c_str(),
                fmt::format("g1's logits produce g2 (id {})", g2).c_str());
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", 3,
                fmt::format("decode 2: feed g2; it attends to {} cached + its own", P + 1).c_str(),
                (P <= 6 ? tp + ", g1, g2" : fmt::format("t1..t{}, g1, g2", P)).c_str(),
                fmt::format("P+2 = {}", len_2).c_str(), kv(len_2).c_str(),
                fmt::format("g2's logits produce the next output (id {})", g3).c_str());
    std::printf("   output g1 g2 g3 = ids [%d, %d, %d] = %s %s %s\n", g1, g2, g3, lab::quoted_token(tok, g1).c_str(),
                lab::quoted_token(tok, g2).c_str(), lab::quoted_token(tok, g3).c_str());
    std::printf("   Shapes: prefill writes K/V %s in every layer; each decode step feeds one token id [B, 1] =\n"
                "   [1, 1] and writes new K/V [B, H_kv, 1, D] = %s, one more column of the cache.\n", kv(P).c_str(),
                kv(1).c_str());
    std::printf("   No extra pass produces output token 1: the prefill pass already ended with t%d's logits, which\n"
                "   chose g1. Decode step 1 CONSUMES g1 and produces g2. Cache: %d -> %d -> %d.\n", P, len_prefill,
                len_1, len_2);
    bool trace_ok = len_prefill == P && len_1 == P + 1 && len_2 == P + 2;
    {
        GenerateOptions g;
        g.max_new_tokens = 3;
        g.stop_at_eos = false;
        auto r = generate(engine, ids, g);
        bool same = r.generated_ids == std::vector<int>{g1, g2, g3};
        std::printf("   check: cache lengths %s; tokens %s the engine's own generate()\n\n",
                    trace_ok ? "P, P+1, P+2 as expected" : "WRONG (expected P, P+1, P+2)",
                    same ? "match" : "DO NOT match");
        trace_ok = trace_ok && same;
    }
    js["trace"] = {{"prompt_ids", ids}, {"output_ids", {g1, g2, g3}}, {"cache_lengths", {len_prefill, len_1, len_2}},
                   {"kv_shapes", {kv(len_prefill), kv(len_1), kv(len_2)}}, {"ok", trace_ok}};

    // ---- 2. The measurement recipe.
    const std::string cuda = engine.device() == Device::cpu
                                 ? "CUDA none (CPU run)"
                                 : "CUDA backend (this engine does not report its CUDA version: see nvidia-smi)";
    const std::string software = fmt::format("{}, {}, {}, {}", compiler_version(), onednn_version(),
                                             openmp_version(), cuda);
    std::string hardware = fmt::format("{}, {} cores, {:.1f} GiB memory", cpu_model(), cpu_cores(), memory_gib());
    if (engine.device() == Device::cpu) hardware += fmt::format(", OpenMP threads: {}", omp_get_max_threads());
    else hardware += fmt::format("; GPU: {}", engine.hardware());
    std::printf("2. Measuring the two phases\n");
    std::printf("   Fixed setup\n");
    std::printf("   %-17s %s\n", "model", o.common.model.c_str());
    std::printf("   %-17s %s\n", "hardware", hardware.c_str());
    std::printf("   %-17s %s\n", "software", software.c_str());
    std::printf("   %-17s %s\n", "precision", o.common.precision.c_str());
    std::printf("   %-17s %d\n", "batch size B", 1);
    std::printf("   %-17s %d\n", "prompt length P", P);
    std::printf("   %-17s %d tokens: 1 from prefill + %d decode steps\n", "output length", o.steps + 1, o.steps);
    std::printf("   %-17s use_cache on (off is compared in section 3)\n", "cache setting");
    std::printf("   %-17s %d, discarded\n", "warm-up runs", o.warmup);
    std::printf("   %-17s %d\n", "measured runs", o.repeats);
    std::printf("   %-17s %s\n", "timing", engine.timing_method().c_str());

    std::vector<double> prefill_ms, step_ms_all, run_ms;
    std::vector<std::vector<double>> by_step(std::size_t(o.steps));
    std::vector<int> first_tokens;
    int final_len = 0;
    bool deterministic = true;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const bool measured = run >= o.warmup;
        engine.reset(0);
        const float* lg = nullptr;
        double pre = engine.time_ms([&] { lg = engine.prefill(0, ids); });
        int first = argmax(lg, V);
        std::vector<double> steps_ms;
        std::vector<int> toks = ex::decode_loop(engine, 0, first, o.steps, steps_ms);
        toks.insert(toks.begin(), first);
        if (first_tokens.empty()) first_tokens = toks;
        else deterministic = deterministic && toks == first_tokens;
        final_len = engine.cache_len(0);
        if (!measured) continue;
        prefill_ms.push_back(pre);
        double sum = pre;
        for (int i = 0; i < int(steps_ms.size()) && i < o.steps; i++) {
            step_ms_all.push_back(steps_ms[std::size_t(i)]);
            by_step[std::size_t(i)].push_back(steps_ms[std::size_t(i)]);
            sum += steps_ms[std::size_t(i)];
        }
        run_ms.push_back(sum);
    }
    Stats pre = ex::stats_of(prefill_ms), dec = ex::stats_of(step_ms_all), whole = ex::stats_of(run_ms);
    std::printf("\n   Results (model-side, over %d measured runs)\n", o.repeats);
    std::printf("   prefill, %d tokens in one pass:   %s\n", P, stats_line(pre).c_str());
    std::printf("   decode, one token per step:      %s\n", stats_line(dec).c_str());
    std::printf("   prefill + %d steps:               median %.3f ms\n", o.steps, whole.median);
    std::printf("   throughput: prefill %.0f tokens/s, decode %.0f tokens/s (median times)\n",
                1000.0 * P / pre.median, 1000.0 / dec.median);
    std::printf("   per-step median by step (the cache grows by one each step):\n     ");
    for (int i = 0; i < o.steps; i++) {
        if (o.steps > 12 && i == 6) {
            std::printf("...  ");
            i = o.steps - 6;
        }
        std::printf("%d: %.3f  ", i + 1, ex::stats_of(by_step[std::size_t(i)]).median);
    }
    std::printf("\n");
    const bool len_ok = final_len == P + o.steps;
    std::printf("   final cache length %d, expected P + steps = %d + %d: %s\n", final_len, P, o.steps,
                len_ok ? "ok" : "WRONG");
    std::printf("   tokens identical in every run: %s\n\n", deterministic ? "yes" : "NO");

    // ---- 3. With and without the cache, through the engine's generate().
    GenerateResult with{}, without{};
    if (o.compare) {
        GenerateOptions g;
        g.max_new_tokens = o.steps + 1;
        g.stop_at_eos = false;
        generate(engine, ids, g);  // warm-up
        with = generate(engine, ids, g);
        g.use_cache = false;
        without = generate(engine, ids, g);
        std::printf("3. use_cache on vs off: %d output tokens with generate()\n", o.steps + 1);
        std::printf("   %-14s %10s %10s   %-14s %10s %10s\n", "with cache", "tokens in", "ms", "without cache",
                    "tokens in", "ms");
        for (std::size_t i = 0; i < with.trace.size(); i++) {
            if (with.trace.size() > 12 && i == 5) {
                std::printf("   ...\n");
                i = with.trace.size() - 4;
            }
            const TraceRow &a = with.trace[i], &b = without.trace[i];
            std::printf("   %-14s %10d %10.3f   %-14s %10d %10.3f\n", a.phase.c_str(), a.tokens_in, a.ms,
                        b.phase.c_str(), b.tokens_in, b.ms);
        }
        double tw = 0, tn = 0;
        for (auto& r : with.trace) tw += r.ms;
        for (auto& r : without.trace) tn += r.ms;
        std::printf("   total model time: %.3f ms with the cache, %.3f ms without (%.1fx); same tokens: %s\n",
                    tw, tn, tn / tw, with.generated_ids == without.generated_ids ? "yes" : "NO");
        std::printf("   Without the cache every step reruns the whole sequence so far (P + i tokens); with it, a\n"
                    "   step runs one token and reads the others' K/V from the cache.\n\n");
        js["use_cache"] = {{"with_ms", tw}, {"without_ms", tn}, {"same_tokens", with.generated_ids == without.generated_ids},
                           {"with_ttft_ms", with.ttft_ms}, {"with_tpot_ms", with.tpot_ms}};
    }

    // ---- 4. The report.
    std::printf("4. Report\n");
    auto line = [](const char* k, const std::string& v) { std::printf("   %-30s %s\n", k, v.c_str()); };
    line("Model", fmt::format("{} ({}, {} layers, {} heads, {} KV heads)", o.common.model, family_name(c.family),
                              c.n_layers, c.n_heads, Hkv));
    line("Hardware", hardware);
    line("Software stack", software);
    line("Precision", o.common.precision);
    line("Batch size B", "1");
    line("Prompt length P", std::to_string(P));
    line("Output length", fmt::format("{} tokens ({} decode steps)", o.steps + 1, o.steps));
    line("Warm-up runs", std::to_string(o.warmup));
    line("Measured runs", std::to_string(o.repeats));
    line("Prefill time (ms)", fmt::format("median {:.3f}, mean {:.3f} +/- {:.3f}", pre.median, pre.mean, pre.stdev));
    line("Per-step decode (ms, median)", fmt::format("{:.3f} (mean {:.3f} +/- {:.3f}, p90 {:.3f}, n={})", dec.median,
                                                     dec.mean, dec.stdev, dec.p90, dec.n));
    if (o.compare)
        line("TTFT from generate() (ms)", fmt::format("{:.3f} = prefill + choosing the token; TTFT != prefill time",
                                                      with.ttft_ms));
    line("Final cache length", fmt::format("{} (P + steps = {}: {})", final_len, P + o.steps, len_ok ? "ok" : "WRONG"));
    line("Device, sync method", fmt::format("{}: {}", device_name(engine.device()), engine.timing_method()));
    std::printf("   (These are measurements of THIS machine, now: other programs running on it show up as\n"
                "   spread. Report the median and the spread, never one run.)\n");

    js["model"] = o.common.model;
    js["hardware"] = hardware;
    js["software"] = software;
    js["precision"] = o.common.precision;
    js["device"] = device_name(engine.device());
    js["batch"] = 1;
    js["prompt_len"] = P;
    js["decode_steps"] = o.steps;
    js["warmup"] = o.warmup;
    js["repeats"] = o.repeats;
    js["prefill_ms"] = prefill_ms;
    js["prefill_ms_median"] = pre.median;
    js["prefill_ms_mean"] = pre.mean;
    js["prefill_ms_stdev"] = pre.stdev;
    js["decode_step_ms"] = step_ms_all;
    js["decode_ms_median"] = dec.median;
    js["decode_ms_mean"] = dec.mean;
    js["decode_ms_stdev"] = dec.stdev;
    js["decode_ms_p90"] = dec.p90;
    js["final_cache_len"] = final_len;
    js["final_cache_len_ok"] = len_ok;
    js["timing_method"] = engine.timing_method();
    lab::write_lab_json(o.common, js);
    return trace_ok && len_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.common.model = "synthetic:mha-h8-d64";  // its cache is [B, 8, S, 64], the shapes of the classic trace
    CLI::App app{
        "Lab 02: prefill and decode.\n"
        "1. Traces a P-token prompt (P = 4 by default) and two greedy output tokens: what each pass\n"
        "   consumes, the cache length and K/V shape [B, H_kv, S, D] after it, and which position's\n"
        "   logits produce each output token. Prefill produces output token 1; no extra pass does.\n"
        "2. Measures the two phases the careful way: fixed setup, warm-up runs thrown away, model-side\n"
        "   prefill time and per-step decode time over repeated runs, median/mean/stdev.\n"
        "3. Generates the same tokens with and without the KV cache and times both.\n"
        "4. Prints the filled-in report.\n"
        "Your decode_loop() and stats_of() (exercise.cpp) do the decoding and the statistics; test them\n"
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
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
