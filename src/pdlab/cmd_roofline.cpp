// pdlab roofline: this machine's two ceilings (matrix peak, DRAM bandwidth),
// and where a model's prefill and decode land under them.
#include <omp.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "commands.hpp"
#include "base/hardware.hpp"
#include "load/model_source.hpp"
#include "engine/isa.hpp"
#include "measure/roofline.hpp"
#include "startup_load.hpp"

namespace pd::cli {

namespace {

// The model's shape without its weights: the roofline needs no more, and a
// large model's weights would take seconds and gigabytes to make.
Config shape_of(const std::string& spec) {
    namespace fs = std::filesystem;
    if (spec.rfind("synthetic:", 0) == 0) {
        unsigned long long seed = 0;
        return synthetic_config(spec.substr(10), seed);
    }
    fs::path folder = (spec == "tiny" || spec == "tiny-draft") ? data_dir() / "models" / spec : fs::path(spec);
    if (!fs::exists(folder / "config.json"))
        fail("model \"{}\": no config.json at {}. {}", spec, (folder / "config.json").string(), model_help());
    Config c = load_hf_config(folder / "config.json");
    c.name = spec;
    return c;
}

std::string si(double v, const char* unit) {
    if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
    if (v >= 1e6) return fmt::format("{:.1f} M{}", v / 1e6, unit);
    if (v >= 1e3) return fmt::format("{:.1f} k{}", v / 1e3, unit);
    return fmt::format("{:.0f} {}", v, unit);
}

struct RooflineOptions {
    std::string model;
    std::string json;
    int threads = 0;
    int prompt_len = 512;
    int context = 0;
    std::vector<int> batches{1, 16};
    int bandwidth_mib = 1024;
    int peak_n = 2048;
    double seconds = 1.0;
    int decode_context() const { return context > 0 ? context : prompt_len; }  // --context, else P
};

constexpr const char* roofline_help =
    "Measure this machine's two ceilings and place prefill and decode under them.\n"
    "\n"
    "A kernel doing F FLOPs while moving B bytes to or from DRAM takes at least\n"
    "    max(F / peak, B / bandwidth).\n"
    "Its arithmetic intensity I = F / B (FLOP per byte) says which term wins: below the\n"
    "ridge point peak / bandwidth it is memory-bound, above it compute-bound.\n"
    "  peak       oneDNN's matrix product on large square matrices (weights in oneDNN's\n"
    "             packed layout), in f32 and in bf16: the best our prefill can reach.\n"
    "  bandwidth  a vector streaming read (pdlab isa) of a buffer far larger than the last-level\n"
    "             cache (--bandwidth-mib), 8 accumulators per thread, best of the passes;\n"
    "             checked against glibc's memchr reading the same buffer.\n"
    "With --model it counts each phase's FLOPs and bytes:\n"
    "  prefill of P tokens: 2 x matrix params (without the head) x P, plus the head for\n"
    "    the last position only, plus causal attention 2 x 2 x L x H x D x P(P+1)/2;\n"
    "    bytes: every weight once. Intensity about P/2 FLOP per f32 weight byte: far\n"
    "    above the ridge, so prefill's floor is FLOPs / peak.\n"
    "  decode, one step for B sequences with C cached positions each: every weight read\n"
    "    once (2 FLOPs per weight per sequence), plus B x C x K/V bytes. Intensity about\n"
    "    B/2 FLOP per f32 weight byte: far below the ridge at B = 1, so decode's floor is\n"
    "    bytes / bandwidth -- until B nears the ridge, where batching stops being free.\n"
    "Example: pdlab roofline --model synthetic:bench-llama-125m --threads 2 --json roof.json";

CLI::App* add_roofline_options(CLI::App& app, RooflineOptions& o) {
    auto* sub = app.add_subcommand("roofline", roofline_help);
    sub->add_option("--model,-m", o.model, "also place this model's phases on the roofline. " + model_help());
    sub->add_option("--json", o.json, "also write the results to this JSON file");
    sub->add_option("--threads,-t", o.threads,
                    "OpenMP threads (default: the cores other work leaves free, now " + default_threads_note() + ")")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--prompt-len,-P", o.prompt_len, "prompt length P for the prefill floor")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    sub->add_option("--context,-C", o.context,
                    "cached positions per sequence for the decode floor (default: the prompt length)")
        ->check(CLI::Range(1, 1 << 20));
    sub->add_option("--batch,-B", o.batches, "decode batch sizes to place (e.g. -B 1 -B 4 -B 16)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    sub->add_option("--bandwidth-mib", o.bandwidth_mib, "buffer the bandwidth probe streams, in MiB")
        ->check(CLI::Range(64, 1 << 16))
        ->capture_default_str();
    sub->add_option("--peak-n", o.peak_n, "M = N = K of the peak probe's matrix product")
        ->check(CLI::Range(256, 8192))
        ->capture_default_str();
    sub->add_option("--seconds", o.seconds, "minimum seconds per measurement")
        ->check(CLI::Range(0.05, 60.0))
        ->capture_default_str();
    return sub;
}

// Everything the probes measured, and the two rooflines (f32, bf16) built on them.
struct Measured {
    BandwidthResult bw, bw_again, libc;  // our read probe before and after the peaks; glibc's memchr
    PeakResult f32, bf16;
    double gbps = 0;                     // the better of bw and bw_again: the bandwidth ceiling
    Ceilings roof32, roof16;
    const Ceilings& roof(Precision p) const { return p == Precision::f32 ? roof32 : roof16; }
};

Measured measure_ceilings(const RooflineOptions& o) {
    Measured m;
    const std::size_t bw_bytes = std::size_t(o.bandwidth_mib) << 20;
    m.bw = measure_read_bandwidth(bw_bytes, 5, o.seconds);
    m.libc = measure_read_bandwidth(bw_bytes, 5, o.seconds, ReadLoop::libc_memchr);
    m.f32 = measure_peak_gflops(Precision::f32, o.peak_n, 3, o.seconds);
    m.bf16 = measure_peak_gflops(Precision::bf16, o.peak_n, 3, o.seconds);
    // The bandwidth again after the compute probes: it drifts on a shared machine.
    m.bw_again = measure_read_bandwidth(bw_bytes, 5, o.seconds);
    m.gbps = std::max(m.bw.best_gbps, m.bw_again.best_gbps);
    m.roof32 = {m.f32.best_gflops, m.gbps};
    m.roof16 = {m.bf16.best_gflops, m.gbps};
    return m;
}

void print_ceilings(const Measured& m, int bandwidth_mib) {
    std::printf("%-28s %14s   %s\n", "ceiling", "measured", "how");
    std::printf("%-28s %9.1f GB/s   best of %d + %d passes over %d MiB (medians %.1f, %.1f)\n",
                "DRAM read bandwidth", m.gbps, m.bw.passes, m.bw_again.passes, bandwidth_mib,
                m.bw.median_gbps, m.bw_again.median_gbps);
    std::printf("%-28s %9.1f GB/s   the same buffer read by glibc's memchr, between the two probes: the probe\n"
                "%-28s %14s   reads at %.0f%% of it (%s kernels)\n",
                "  check: libc read", m.libc.best_gbps, "", "", 100.0 * m.gbps / m.libc.best_gbps,
                kernel_isa().c_str());
    std::printf("%-28s %6.1f GFLOP/s   %d^3 products, %s\n", "f32 matrix peak (oneDNN)",
                m.f32.best_gflops, m.f32.n, m.f32.impl.c_str());
    std::printf("%-28s %6.1f GFLOP/s   %d^3 products, %s\n", "bf16 matrix peak (oneDNN)",
                m.bf16.best_gflops, m.bf16.n, m.bf16.impl.c_str());
    std::printf("%-28s %6.2f FLOP/byte below it a kernel is memory-bound\n", "ridge point, f32", m.roof32.ridge());
    std::printf("%-28s %6.2f FLOP/byte\n", "ridge point, bf16", m.roof16.ridge());
}

nlohmann::json ceilings_json(const Measured& m, int peak_n) {
    nlohmann::json j;
    j["cpu"] = cpu_model();
    j["hardware"] = cpu_summary();
    j["threads"] = omp_get_max_threads();
    j["bandwidth_gbps"] = m.gbps;
    j["bandwidth_passes"] = {m.bw.passes, m.bw_again.passes};
    j["bandwidth_gbps_median"] = {m.bw.median_gbps, m.bw_again.median_gbps};
    j["bandwidth_bytes"] = m.bw.bytes;
    j["bandwidth_gbps_libc_memchr"] = m.libc.best_gbps;
    j["kernel_isa"] = kernel_isa();
    j["peak_gflops_f32"] = m.f32.best_gflops;
    j["peak_gflops_bf16"] = m.bf16.best_gflops;
    j["peak_impl_f32"] = m.f32.impl;
    j["peak_impl_bf16"] = m.bf16.impl;
    j["peak_n"] = peak_n;
    j["ridge_flop_per_byte_f32"] = m.roof32.ridge();
    j["ridge_flop_per_byte_bf16"] = m.roof16.ridge();
    j["compiler"] = compiler_version();
    j["onednn"] = onednn_version();
    return j;
}

// One line of the phase table on stdout and the same row in JSON.
struct PhaseRow {
    std::string name;
    Precision precision;
    PhaseCost cost;
    double ridge;
    std::string floor_text;
    int batch, tokens;
};

void add_phase_row(const PhaseRow& r, nlohmann::json& phases) {
    const PhaseCost& pc = r.cost;
    std::printf("%-26s %-5s %10s %10s %10.2f %7.2f %-8s %s\n", r.name.c_str(), precision_name(r.precision),
                si(pc.flops, "").c_str(), si(pc.bytes, "B").c_str(), pc.intensity, r.ridge, pc.bound,
                r.floor_text.c_str());
    phases.push_back({{"phase", r.name}, {"precision", precision_name(r.precision)}, {"batch", r.batch},
                      {"tokens", r.tokens}, {"flops", pc.flops}, {"bytes", pc.bytes},
                      {"intensity", pc.intensity}, {"ridge", r.ridge},
                      {"bound", pc.bound}, {"floor_ms", pc.floor_ms},
                      {"compute_ms", pc.compute_ms}, {"memory_ms", pc.memory_ms}});
}

// Prefill of P tokens and decode at each batch size, in precision p; returns the
// batch size near which decode turns compute-bound.
double place_phases(const RooflineOptions& o, const Config& c, Precision p, const Ceilings& roof,
                    nlohmann::json& phases) {
    const int P = o.prompt_len, C = o.decode_context();
    PhaseCost pre = prefill_cost(c, p, P, 1, roof);
    add_phase_row({fmt::format("prefill P={}", P), p, pre, roof.ridge(),
                   fmt::format("{:.1f} ms ({:.0f} tokens/s)", pre.floor_ms, 1000.0 * P / pre.floor_ms), 1, P},
                  phases);
    for (int B : o.batches) {
        PhaseCost dec = decode_cost(c, p, B, C, roof);
        add_phase_row({fmt::format("decode B={}, context {}", B, C), p, dec, roof.ridge(),
                       fmt::format("{:.2f} ms/step ({:.0f} tokens/s)", dec.floor_ms, 1000.0 * B / dec.floor_ms),
                       B, B},
                      phases);
    }
    // Where batching stops being free: weight bytes alone, 2 FLOPs per weight per sequence.
    const double b_star = roof.ridge() * bytes_per_weight(p) / 2.0;
    std::printf("%-26s %-5s decode turns compute-bound near batch %.0f (ridge x %g bytes per weight / 2 FLOPs)\n",
                "", precision_name(p), b_star, bytes_per_weight(p));
    return b_star;
}

void place_model(const RooflineOptions& o, const Config& c, const Measured& m, nlohmann::json& j) {
    std::printf("\nmodel %s: %.1f M matrix parameters, KV cache %zu bytes per token (f32)\n",
                o.model.c_str(), double(c.n_matmul_params()) / 1e6, c.kv_elems_per_token() * sizeof(float));
    std::printf("%-26s %-5s %10s %10s %10s %7s %-8s %s\n", "phase", "prec", "FLOPs", "bytes",
                "FLOP/byte", "ridge", "bound", "floor");
    nlohmann::json phases = nlohmann::json::array();
    for (Precision p : {Precision::f32, Precision::bf16})
        j[fmt::format("decode_compute_bound_batch_{}", precision_name(p))] =
            place_phases(o, c, p, m.roof(p), phases);
    j["model"] = o.model;
    j["prompt_len"] = o.prompt_len;
    j["context"] = o.decode_context();
    j["matmul_params"] = c.n_matmul_params();
    j["kv_bytes_per_token"] = c.kv_elems_per_token() * sizeof(float);
    j["phases"] = phases;
    std::printf("\nprefill lands far right of the ridge (compute-bound), decode at small batch far\n"
                "left of it (memory-bound): a decode step can go no faster than streaming every\n"
                "weight once, however many cores are idle.\n");
}

int run_roofline(const RooflineOptions& o) {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    Config c;
    if (!o.model.empty()) c = shape_of(o.model);  // fail early on a bad name
    std::printf("roofline of %s\n\n", cpu_summary().c_str());
    std::fflush(stdout);
    const Measured m = measure_ceilings(o);
    print_ceilings(m, o.bandwidth_mib);
    nlohmann::json j = ceilings_json(m, o.peak_n);
    if (!o.model.empty()) place_model(o, c, m, j);
    if (!o.json.empty()) write_json_file(o.json, j);
    return 0;
}

}  // namespace

Command add_roofline(CLI::App& app) { return options_command(app, add_roofline_options, run_roofline); }

}  // namespace pd::cli
