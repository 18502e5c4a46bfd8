// pdlab bench: model-side prefill time and per-step decode time, each next to
// the floor this machine allows for it; with several precisions, their decode
// steps in turns (cmd_bench_turns.cpp).
#include "cmd_bench.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "commands.hpp"
#include "base/hardware.hpp"
#include "startup_load.hpp"

namespace pd::cli {

double decode_vs_floor(const BenchResult& r) { return r.decode_step.median / r.decode_floor.floor_ms; }
double decode_effective_gbps(const BenchResult& r) { return r.decode_floor.bytes / (r.decode_step.median * 1e6); }

namespace {

// bench's --precision takes a comma list: the common option's check of one
// name is switched off, and parse_precision_list checks each item instead.
void accept_precision_list(CLI::App* sub) {
    CLI::Option* precision = sub->get_option("--precision");
    precision->get_validator()->active(false);
    precision->description(precision->get_description() +
                           " A comma list (e.g. f32,bf16,int8) times them in turns (see above).");
}

// What `pdlab bench --help` says before the options.
constexpr const char* kBenchAbout = R"(Time the two phases on random prompt tokens: B prompts of P tokens prefilled (one pass
each), then --gen decode steps for all B sequences together. Warm-up runs are thrown
away; the median, mean and stdev over --repeats runs are reported.
Each phase is also set against its floor on this machine (see 'pdlab roofline --help'):
  prefill >= FLOPs done / matrix peak   (a quick oneDNN probe, or --peak-gflops)
  decode  >= (weight bytes + KV bytes read) / DRAM bandwidth per step
The bandwidth is measured right before and right after the timed runs (0.3 s each):
on a shared machine it drifts, so a ratio is only honest against its own run's.
Run it under bench/malloc_count.so (LD_PRELOAD) to also count heap allocations and
thread creations inside the decode loop (bench/run does).
Several precisions (--precision f32,bf16,int8) load the model once in each, every one with
its own KV cache and the same prompt, and take their decode steps in turns (f32, bf16,
int8, f32, ...: a round is one step of each). Why: DRAM bandwidth drifts by a quarter
within a minute on a shared machine, so runs made one after another can land on
different phases and their ratio measures the drift; steps in turns share it. Each pair's
speed-up is the median of its per-round ratios, printed next to what the bytes allow.
Example: pdlab bench --model synthetic:bench-llama-125m --prompt-len 512 --gen 32 --threads 2
         pdlab bench -m synthetic:bench-llama-125m --precision f32,bf16,int8 -P 128 -n 64 -r 3)";

CLI::App* add_bench_options(CLI::App& app, BenchCliOptions& o) {
    auto* sub = app.add_subcommand("bench", kBenchAbout);
    add_common(sub, o.common);
    accept_precision_list(sub);
    o.group_size = sub->get_option("--group-size");
    add_workload(sub, o.bench);
    sub->add_option("--peak-gflops", o.bench.peak_gflops,
                    "matrix peak for the prefill floor, in GFLOP/s (default: measure it with a "
                    "quick oneDNN probe in the model's precision)");
    sub->add_option("--probe-seconds", o.bench.bandwidth_probe_s,
                    "seconds of each DRAM bandwidth probe before and after the timed runs (0: no "
                    "probes, no floors)")
        ->capture_default_str();
    add_timeline(sub, o.timeline,
                 "Track \"engine\": each warm-up and measured run, its prefill and decode spans inside "
                 "(the layers inside them); one precision only.");
    return sub;
}

// Measured time over the floor's (how far from what the machine allows), and the
// GFLOP/s actually reached.
double prefill_vs_floor(const BenchResult& r) { return r.prefill.median / r.prefill_floor.floor_ms; }
double prefill_fraction_of_peak(const BenchResult& r) {
    return r.prefill_floor.flops / (r.prefill.median * 1e6) / r.peak_gflops;
}

void print_floors(const BenchOptions& b, const BenchResult& r) {
    std::printf("ceilings DRAM read %.1f GB/s before, %.1f after (floors use %.1f); matrix peak %.0f GFLOP/s (%s)\n",
                r.bandwidth_before.best_gbps, r.bandwidth_after.best_gbps, r.bandwidth_gbps,
                r.peak_gflops, r.peak_source.c_str());
    std::printf("floor    prefill %.2f ms (%s-bound: %.1f GFLOP, %.0f FLOP/byte); measured %.2fx the floor, %.0f%% of peak\n",
                r.prefill_floor.floor_ms, r.prefill_floor.bound, r.prefill_floor.flops / 1e9,
                r.prefill_floor.intensity, prefill_vs_floor(r), 100.0 * prefill_fraction_of_peak(r));
    if (b.gen > 0)
        std::printf("floor    decode step %.3f ms (%s-bound: %.1f MB read, %.1f FLOP/byte, context %.1f); measured %.2fx the floor, %.1f GB/s effective\n",
                    r.decode_floor.floor_ms, r.decode_floor.bound, r.decode_floor.bytes / 1e6,
                    r.decode_floor.intensity, r.decode_context, decode_vs_floor(r), decode_effective_gbps(r));
}

void print_bench(const BenchOptions& b, const BenchResult& r) {
    std::printf("prefill  %4d x %d tokens: %s  (%.1f tokens/s)\n", b.batch, b.prompt_len,
                format_stats(r.prefill).c_str(), r.prefill_tokens_per_s);
    std::printf("decode   batch %d, per step: %s  (%.1f tokens/s)\n", b.batch,
                format_stats(r.decode_step).c_str(), r.decode_tokens_per_s);
    std::printf("cache    final length %d (expected P + gen = %d)\n", r.final_cache_len, b.prompt_len + b.gen);
    if (r.bandwidth_gbps > 0) print_floors(b, r);
    if (r.decode_allocations >= 0)
        std::printf("checks   decode loop: %ld heap allocations, %ld threads created (process threads %d before, %d after)\n",
                    r.decode_allocations, r.decode_threads_created, r.threads_before, r.threads_after);
}

// "f32, bf16" -> {"f32", "bf16"}: each item a precision, none twice; and
// the options that do not fit the list refused before anything loads.
std::vector<std::string> parse_precision_list(const BenchCliOptions& o) {
    const std::string& list = o.common.precision;
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (std::size_t start = 0; start <= list.size();) {
        std::size_t end = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, end - start);
        if (item.empty()) fail("--precision \"{}\" has an empty item (expected e.g. f32,bf16,int8)", list);
        if (std::find(kPrecisionNames.begin(), kPrecisionNames.end(), item) == kPrecisionNames.end())
            fail("--precision: \"{}\" is not a precision; each item must be one of {}", item,
                 fmt::join(kPrecisionNames, ", "));
        if (!seen.insert(item).second)
            fail("--precision names {} twice: each precision takes one step per round", item);
        names.push_back(item);
        start = end + 1;
    }
    if (names.size() > 1 && !o.timeline.path.empty())
        fail("--timeline records one precision's runs: give --precision one name, or drop --timeline");
    if (o.group_size->count() > 0 && !seen.count("int8") && !seen.count("int4"))
        fail("--group-size is an int8 and int4 option, and --precision {} has neither: add one or drop "
             "--group-size", list);
    return names;
}

}  // namespace

// What ran, where, and how it was timed.
void add_run_fields(nlohmann::json& j, const BenchCliOptions& o, const Engine& engine) {
    j["model"] = o.common.model;
    j["family"] = family_name(engine.config().family);
    j["precision"] = o.common.precision;
    j["device"] = device_name(engine.device());
    j["hardware"] = engine.hardware();
    j["cpu"] = cpu_model();
    j["threads"] = omp_get_max_threads();
    add_workload_fields(j, o.bench);
    j["timing_method"] = engine.timing_method();
    j["compiler"] = compiler_version();
    j["onednn"] = onednn_version();
}

void add_workload_fields(nlohmann::json& j, const BenchOptions& b) {
    j["batch"] = b.batch;
    j["prompt_len"] = b.prompt_len;
    j["steps"] = b.gen;
    j["warmup"] = b.warmup;
    j["repeats"] = b.repeats;
}

void add_speed_fields(nlohmann::json& j, const BenchResult& r) {
    j["prefill_ms"] = r.prefill_ms;
    j["prefill_ms_median"] = r.prefill.median;
    j["prefill_ms_stdev"] = r.prefill.stdev;
    j["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
    j["decode_ms_per_token_median"] = r.decode_step.median;
    j["decode_ms_per_token_stdev"] = r.decode_step.stdev;
    j["decode_ms_per_token_p90"] = r.decode_step.p90;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s;
    j["final_cache_len"] = r.final_cache_len;
}

void add_timing_fields(nlohmann::json& j, const BenchResult& r) {
    add_speed_fields(j, r);
    j["prefill_ms_mean"] = r.prefill.mean;
    j["decode_ms_per_token_mean"] = r.decode_step.mean;
    j["decode_step_ms"] = r.decode_step_ms;
    j["decode_context_mean"] = r.decode_context;
    j["decode_allocations"] = r.decode_allocations;
    j["decode_threads_created"] = r.decode_threads_created;
    j["process_threads_before"] = r.threads_before;
    j["process_threads_after"] = r.threads_after;
}

// The ceilings of this run and the floors they imply (0 when not measured).
void add_floor_fields(nlohmann::json& j, const BenchOptions& b, const BenchResult& r) {
    const bool floors = r.bandwidth_gbps > 0;
    j["bandwidth_gbps_before"] = r.bandwidth_before.best_gbps;
    j["bandwidth_gbps_after"] = r.bandwidth_after.best_gbps;
    j["bandwidth_gbps_median_before"] = r.bandwidth_before.median_gbps;
    j["bandwidth_gbps_median_after"] = r.bandwidth_after.median_gbps;
    j["bandwidth_gbps"] = r.bandwidth_gbps;
    j["peak_gflops"] = r.peak_gflops;
    j["peak_source"] = r.peak_source;
    j["prefill_flops"] = r.prefill_floor.flops;
    j["prefill_bytes"] = r.prefill_floor.bytes;
    j["prefill_intensity"] = r.prefill_floor.intensity;
    j["prefill_floor_ms"] = floors ? r.prefill_floor.floor_ms : 0.0;
    j["prefill_floor_bound"] = r.prefill_floor.bound;
    j["prefill_vs_floor"] = floors ? prefill_vs_floor(r) : 0.0;
    j["prefill_fraction_of_peak"] = r.peak_gflops > 0 ? prefill_fraction_of_peak(r) : 0.0;
    j["decode_bytes_per_step"] = r.decode_floor.bytes;
    j["decode_flops_per_step"] = r.decode_floor.flops;
    j["decode_intensity"] = r.decode_floor.intensity;
    j["decode_floor_ms"] = floors ? r.decode_floor.floor_ms : 0.0;
    j["decode_floor_bound"] = r.decode_floor.bound;
    j["decode_vs_floor"] = floors && b.gen > 0 ? decode_vs_floor(r) : 0.0;
    j["decode_effective_gbps"] = b.gen > 0 ? decode_effective_gbps(r) : 0.0;
}

std::string cpu_kernels(const Engine& engine) {
    // Only a CPU engine packs the weights for the CPU kernels.
    return engine.device() == Device::cpu ? describe_kernels(cpu_weights(engine.host_model()).layers[0].qkv) : "";
}

namespace {

int run_bench_command(const BenchCliOptions& o) {
    const std::vector<std::string> precisions = parse_precision_list(o);
    if (precisions.size() > 1) return run_bench_turns_command(o, precisions);
    const BenchOptions& b = o.bench;
    const auto timeline = open_timeline(o.timeline, o.common.device, "pdlab bench");
    if (timeline) timeline->timeline().name_track({1, 1}, "engine");
    Session s = load_session(o.common);
    start_engine(s, o.common, b.batch, std::int64_t(b.prompt_len) + b.gen);
    std::fprintf(stderr, "benchmarking %s (%s) on %s: P=%d, %d decode steps, batch %d, %d warm-up + %d runs\n",
                 o.common.model.c_str(), o.common.precision.c_str(), s.engine->hardware().c_str(),
                 b.prompt_len, b.gen, b.batch, b.warmup, b.repeats);
    const std::string kernels = cpu_kernels(*s.engine);
    if (!kernels.empty()) std::fprintf(stderr, "kernels: %s\n", kernels.c_str());
    print_threads_note(o.common.threads);
    BenchResult r = run_bench(*s.engine, b);
    finish_timeline(timeline.get(), o.timeline.path);
    print_bench(b, r);
    warn_if_timings_unreliable();
    if (o.common.json.empty()) return 0;
    nlohmann::json j;
    add_run_fields(j, o, *s.engine);
    add_timing_fields(j, r);
    add_floor_fields(j, b, r);
    if (!kernels.empty()) j["cpu_kernels"] = kernels;
    write_json_file(o.common.json, j);
    return 0;
}

}  // namespace

Command add_bench(CLI::App& app) { return options_command(app, add_bench_options, run_bench_command); }

}  // namespace pd::cli
