// pdlab bench: model-side prefill time and per-step decode time.
#include <omp.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "hardware.hpp"

namespace pd::cli {

Command add_bench(CLI::App& app) {
    struct Opts {
        CommonOptions common;
        BenchOptions bench;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("bench",
        "Time the two phases on random prompt tokens: B prompts of P tokens prefilled (one pass\n"
        "each), then --gen decode steps for all B sequences together. Warm-up runs are thrown\n"
        "away; the median, mean and stdev over --repeats runs are reported.\n"
        "Example: pdlab bench --model synthetic:bench-llama-125m --prompt-len 512 --gen 32 --threads 2");
    add_common(sub, o->common);
    sub->add_option("--prompt-len,-P", o->bench.prompt_len, "prompt tokens per sequence")->capture_default_str();
    sub->add_option("--gen,-n", o->bench.gen, "decode steps")->capture_default_str();
    sub->add_option("--batch,-B", o->bench.batch, "sequences decoded together")->capture_default_str();
    sub->add_option("--warmup", o->bench.warmup, "runs discarded first")->capture_default_str();
    sub->add_option("--repeats,-r", o->bench.repeats, "measured runs")->capture_default_str();
    sub->add_option("--seed", o->bench.seed, "seed of the random prompt")->capture_default_str();
    return {sub, [o]() {
        const BenchOptions& b = o->bench;
        Session s = open_session(o->common, b.batch, b.prompt_len + b.gen);
        const Config& c = s.engine->config();
        std::fprintf(stderr, "benchmarking %s (%s) on %s: P=%d, %d decode steps, batch %d, %d warm-up + %d runs\n",
                     o->common.model.c_str(), o->common.precision.c_str(), s.engine->hardware().c_str(),
                     b.prompt_len, b.gen, b.batch, b.warmup, b.repeats);
        BenchResult r = run_bench(*s.engine, b);
        std::printf("prefill  %4d x %d tokens: %s  (%.1f tokens/s)\n", b.batch, b.prompt_len,
                    format_stats(r.prefill).c_str(), r.prefill_tokens_per_s);
        std::printf("decode   batch %d, per step: %s  (%.1f tokens/s)\n", b.batch,
                    format_stats(r.decode_step).c_str(), r.decode_tokens_per_s);
        std::printf("cache    final length %d (expected P + gen = %d)\n", r.final_cache_len, b.prompt_len + b.gen);
        if (!o->common.json.empty()) {
            nlohmann::json j;
            j["model"] = o->common.model;
            j["family"] = family_name(c.family);
            j["precision"] = o->common.precision;
            j["device"] = device_name(s.engine->device());
            j["hardware"] = s.engine->hardware();
            j["threads"] = omp_get_max_threads();
            j["batch"] = b.batch;
            j["prompt_len"] = b.prompt_len;
            j["steps"] = b.gen;
            j["warmup"] = b.warmup;
            j["repeats"] = b.repeats;
            j["prefill_ms"] = r.prefill_ms;
            j["prefill_ms_median"] = r.prefill.median;
            j["prefill_ms_mean"] = r.prefill.mean;
            j["prefill_ms_stdev"] = r.prefill.stdev;
            j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
            j["decode_ms_per_token_median"] = r.decode_step.median;
            j["decode_ms_per_token_mean"] = r.decode_step.mean;
            j["decode_ms_per_token_stdev"] = r.decode_step.stdev;
            j["decode_ms_per_token_p90"] = r.decode_step.p90;
            j["decode_tokens_per_s"] = r.decode_tokens_per_s;
            j["final_cache_len"] = r.final_cache_len;
            j["timing_method"] = s.engine->timing_method();
            j["compiler"] = compiler_version();
            j["onednn"] = onednn_version();
            write_json_file(o->common.json, j);
        }
        return 0;
    }};
}

}  // namespace pd::cli
