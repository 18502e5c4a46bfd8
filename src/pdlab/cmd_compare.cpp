// pdlab compare: the same benchmark (pd::run_bench) on the CPU and on the GPU,
// side by side.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "measure/bench.hpp"
#include "cli_common.hpp"
#include "cmd_bench.hpp"
#include "commands.hpp"
#include "base/hardware.hpp"
#include "startup_load.hpp"

namespace pd::cli {

namespace {

struct Side {
    std::string device, hardware, timing_method;
    BenchResult r;
};

nlohmann::json side_json(const Side& s) {
    nlohmann::json j;
    j["device"] = s.device;
    j["hardware"] = s.hardware;
    j["timing_method"] = s.timing_method;
    add_speed_fields(j, s.r);
    j["ttft_ms"] = s.r.prefill.median;
    j["tpot_ms"] = s.r.decode_step.median;
    return j;
}

// CPU time over GPU time: how many times faster the GPU is (0 when unknown).
double speedup(double cpu_ms, double gpu_ms) { return cpu_ms > 0 && gpu_ms > 0 ? cpu_ms / gpu_ms : 0.0; }

struct CompareOptions {
    std::string model = "synthetic:bench-llama-125m";
    std::string precision = "f32";
    int threads = 0;
    std::string json;
    BenchOptions bench;
};

// What `pdlab compare --help` says before the options.
constexpr const char* kCompareAbout = R"(Run the same benchmark as `pdlab bench` on the CPU and on the GPU (--device cuda) and
print them side by side: prefill time and tokens/s, decode ms per token, TTFT and TPOT
(model-side: no tokenizer, no sampling), the hardware of each, and the GPU's speed-up.
Needs a build with the CUDA backend and a GPU; refused with a message otherwise.
Example: pdlab compare --model synthetic:bench-llama-125m --precision bf16 -P 512 -n 32)";

CLI::App* add_compare_options(CLI::App& app, CompareOptions& o) {
    auto* sub = app.add_subcommand("compare", kCompareAbout);
    sub->add_option("--model,-m", o.model, model_help())->capture_default_str();
    sub->add_option("--precision", o.precision,
                    "f32, or bf16 (weights in bfloat16, products accumulated in float32), on both devices")
        ->check(CLI::IsMember({"f32", "bf16"}))
        ->capture_default_str();
    sub->add_option("--threads,-t", o.threads,
                    "OpenMP threads of the CPU run (default: the cores other work leaves free, now " +
                        default_threads_note() + ")")
        ->check(CLI::PositiveNumber.description("(a positive number)"));
    add_workload(sub, o.bench, ", on each device", " (the same on both)");
    sub->add_option("--json", o.json, "also write both results and the ratios to this JSON file");
    return sub;
}

// The benchmark on one device, with the model already loaded (shared by both runs).
Side bench_on(Device device, const CompareOptions& o, const LoadedModel& lm, const CudaSettings& cuda) {
    const BenchOptions& b = o.bench;
    EngineOptions eo;
    eo.batch = b.batch;
    eo.max_seq = int(std::min<std::int64_t>(std::int64_t(b.prompt_len) + b.gen, lm.model->config.max_seq_len));
    eo.device = device;
    eo.cuda = cuda;
    auto engine = make_engine(lm.model, eo);
    validate(b, *engine);
    Side side{device_name(engine->device()), engine->hardware(), engine->timing_method(), {}};
    std::fprintf(stderr, "benchmarking %s (%s) on %s: P=%d, %d decode steps, batch %d, %d warm-up + %d runs\n",
                 o.model.c_str(), o.precision.c_str(), side.hardware.c_str(), b.prompt_len,
                 b.gen, b.batch, b.warmup, b.repeats);
    side.r = run_bench(*engine, b);
    return side;
}

// One row of the table: the CPU's value, the GPU's, and the speed-up ("-" when unknown).
void print_row(const std::string& what, double cpu, double gpu, double sp) {
    if (sp > 0) std::printf("%-34s %14.3f %14.3f %11.1fx\n", what.c_str(), cpu, gpu, sp);
    else std::printf("%-34s %14.3f %14.3f %12s\n", what.c_str(), cpu, gpu, "-");
}

void print_comparison(const CompareOptions& o, const Side& cpu, const Side& gpu) {
    const BenchOptions& b = o.bench;
    const double sp_prefill = speedup(cpu.r.prefill.median, gpu.r.prefill.median);
    const double sp_decode = speedup(cpu.r.decode_step.median, gpu.r.decode_step.median);
    std::printf("compare %s (%s): P=%d, %d decode steps, batch %d; medians of %d runs after %d warm-up\n",
                o.model.c_str(), o.precision.c_str(), b.prompt_len, b.gen, b.batch, b.repeats, b.warmup);
    std::printf("  cpu  : %s (%d OpenMP threads)\n", cpu.hardware.c_str(), omp_get_max_threads());
    std::printf("  cuda : %s\n", gpu.hardware.c_str());
    std::printf("%-34s %14s %14s %12s\n", "", "cpu", "cuda", "GPU speed-up");
    print_row(fmt::format("prefill ms ({} x {} tokens)", b.batch, b.prompt_len), cpu.r.prefill.median,
              gpu.r.prefill.median, sp_prefill);
    print_row("prefill tokens/s", cpu.r.prefill_tokens_per_s, gpu.r.prefill_tokens_per_s, sp_prefill);
    if (b.gen > 0) {
        print_row("decode ms per step", cpu.r.decode_step.median, gpu.r.decode_step.median, sp_decode);
        print_row("decode tokens/s", cpu.r.decode_tokens_per_s, gpu.r.decode_tokens_per_s, sp_decode);
    }
    print_row("TTFT ms (model-side: the prefill)", cpu.r.prefill.median, gpu.r.prefill.median, sp_prefill);
    if (b.gen > 0)
        print_row("TPOT ms (model-side: one step)", cpu.r.decode_step.median, gpu.r.decode_step.median, sp_decode);
    std::printf("cache: final length %d on cpu, %d on cuda (expected P + gen = %d)\n", cpu.r.final_cache_len,
                gpu.r.final_cache_len, b.prompt_len + b.gen);
    std::printf("timing: cpu: %s\n        cuda: %s\n", cpu.timing_method.c_str(), gpu.timing_method.c_str());
}

nlohmann::json comparison_json(const CompareOptions& o, const Config& config, const Side& cpu, const Side& gpu) {
    nlohmann::json j;
    j["model"] = o.model;
    j["family"] = family_name(config.family);
    j["precision"] = o.precision;
    add_workload_fields(j, o.bench);
    j["threads"] = omp_get_max_threads();
    j["cpu"] = side_json(cpu);
    j["cuda"] = side_json(gpu);
    j["gpu_speedup_prefill"] = speedup(cpu.r.prefill.median, gpu.r.prefill.median);
    j["gpu_speedup_decode"] = speedup(cpu.r.decode_step.median, gpu.r.decode_step.median);
    j["compiler"] = compiler_version();
    j["onednn"] = onednn_version();
    return j;
}

int run_compare(const CompareOptions& o) {
    // Refuse before loading anything: without a GPU there is nothing to compare.
    std::string why;
    if (!cuda_available(&why))
        fail("compare runs the benchmark on the CPU and on the GPU, so it needs --device cuda to "
             "be available, and it is not: {}. To time the CPU alone, use pdlab bench --device cpu.",
             why);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const EngineSettings settings{environment_cuda_settings(), environment_huge_pages()};
    // One model serves both engines, so it keeps its row-major copy for the GPU upload.
    LoadedModel lm = load_model(o.model, parse_precision(o.precision), true,
                                Backends{.cpu = true, .cuda = true, .huge_pages = settings.huge_pages});
    const Side cpu = bench_on(Device::cpu, o, lm, settings.cuda);
    const Side gpu = bench_on(Device::cuda, o, lm, settings.cuda);
    print_comparison(o, cpu, gpu);
    if (!o.json.empty()) write_json_file(o.json, comparison_json(o, lm.model->config, cpu, gpu));
    return 0;
}

}  // namespace

Command add_compare(CLI::App& app) { return options_command(app, add_compare_options, run_compare); }

}  // namespace pd::cli
