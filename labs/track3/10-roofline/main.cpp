// Lab 10: the roofline of this machine, and where prefill and decode land on it.
//
//   [1] the ceilings   DRAM read bandwidth and the matrix peak, measured here
//                      (src/measure/roofline.hpp), and the ridge point between them
//   [2] the counts     your FLOPs and bytes of every product of a prefill and a
//                      decode step, next to the engine's own accounting
//   [3] the phases     real prefill and decode runs of two models, timed; each
//                      placed at your counted intensity and its measured GFLOP/s,
//                      under your roof
//   [4] the turn       the batch at which decode turns compute-bound (yours)
// The points go to --out/roofline.json, and plot.py draws them.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab10.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "measure/roofline.hpp"
#include "plot.hpp"
#include "results.hpp"

using namespace pd;
using namespace pd::lab10;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string si(double v) {
    if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
    return fmt::format("{:.0f}", v);
}

// --- [1] the ceilings ---------------------------------------------------------------

Ceilings measure_machine(const Options& o, Precision p, json& j) {
    std::printf("\n[1] this machine's ceilings (%s, %d threads)\n", cpu_model().c_str(), omp_get_max_threads());
    std::fflush(stdout);
    const std::size_t bytes = std::size_t(o.bandwidth_mib) << 20;
    const BandwidthResult bw = measure_read_bandwidth(bytes, 5, o.seconds);
    const PeakResult peak = measure_peak_gflops(p, o.peak_n, 3, o.seconds);
    // Once more after the peak probe: bandwidth drifts on a shared machine.
    const BandwidthResult bw2 = measure_read_bandwidth(bytes, 5, o.seconds);
    const Ceilings roof{peak.best_gflops, std::max(bw.best_gbps, bw2.best_gbps)};
    std::printf("  DRAM read bandwidth  %8.1f GB/s      best pass over %d MiB (before %.1f, after %.1f)\n",
                roof.bandwidth_gbps, o.bandwidth_mib, bw.best_gbps, bw2.best_gbps);
    std::printf("  %-4s matrix peak     %8.1f GFLOP/s  oneDNN, %d^3 (%s)\n", precision_name(p), roof.peak_gflops,
                peak.n, peak.impl.c_str());
    std::printf("  ridge point          %8.2f FLOP/byte: below it memory-bound, above it compute-bound\n",
                roof.ridge());
    j["ceilings"] = {{"bandwidth_gbps", roof.bandwidth_gbps}, {"bandwidth_gbps_before", bw.best_gbps},
                     {"bandwidth_gbps_after", bw2.best_gbps}, {"peak_gflops", roof.peak_gflops},
                     {"peak_impl", peak.impl}, {"ridge", roof.ridge()}, {"precision", precision_name(p)}};
    return roof;
}

// --- [2] the counts ------------------------------------------------------------------

// Your rows of one pass next to the engine's; false on any difference.
bool compare_counts(const std::vector<Count>& mine, const std::vector<ProductCost>& ref) {
    bool ok = mine.size() == ref.size();
    std::printf("  %-12s %11s %11s %10s\n", "product", "FLOPs", "bytes", "FLOP/byte");
    for (std::size_t i = 0; i < mine.size(); i++) {
        const bool same = i < ref.size() && mine[i].name == ref[i].name &&
                          std::abs(mine[i].flops - ref[i].flops) <= 1e-9 * ref[i].flops &&
                          std::abs(mine[i].bytes - ref[i].bytes) <= 1e-9 * ref[i].bytes;
        ok = ok && same;
        std::printf("  %-12s %11s %10sB %10.2f%s\n", mine[i].name.c_str(), si(mine[i].flops).c_str(),
                    si(mine[i].bytes).c_str(), mine[i].bytes > 0 ? mine[i].flops / mine[i].bytes : 0.0,
                    same ? "" : fmt::format("   <-- engine: {} FLOPs, {}B", si(i < ref.size() ? ref[i].flops : 0),
                                            si(i < ref.size() ? ref[i].bytes : 0)).c_str());
    }
    const double f = total(mine, &Count::flops), b = total(mine, &Count::bytes);
    std::printf("  %-12s %11s %10sB %10.2f\n", "total", si(f).c_str(), si(b).c_str(), f / b);
    return ok;
}

bool show_counts(const Options& o, const Config& c, const std::string& model, Precision p) {
    const int P = o.prompt_len;
    std::printf("\n[2] your counts for %s (%s weights)\n  prefill of %d tokens:\n", model.c_str(),
                precision_name(p), P);
    bool ok = compare_counts(count_phase(c, {Phase::prefill, p, 1, P, 0}), prefill_products(c, p, P, 1));
    std::printf("  one decode step, batch 1, %d cached positions:\n", P);
    ok = compare_counts(count_phase(c, {Phase::decode, p, 1, 0, double(P)}), decode_products(c, p, 1, P)) && ok;
    if (!ok) std::printf("  your counts differ from the engine's: run the lab10.phase tests\n");
    return ok;
}

// --- [4] the turn ------------------------------------------------------------------------

json turning_point(const Config& c, Precision p, double context, const Ceilings& roof) {
    const long mine = compute_bound_batch(c, p, context, roof.ridge());
    const long ref = decode_compute_bound_batch(c, p, context, roof.ridge());
    const double weights_only = roof.ridge() * stored_bytes_per_weight(p) / 2.0;
    std::printf("\n[4] the batch at which one decode step reaches the ridge (%.2f FLOP/byte), context %.1f:\n"
                "  yours %s, the engine's %s (the weights alone would say %.0f)\n", roof.ridge(), context, mine ? std::to_string(mine).c_str() : "never", ref ? std::to_string(ref).c_str() : "never",
                weights_only);
    return {{"context", context}, {"batch", mine}, {"engine_batch", ref},
            {"weights_only_batch", weights_only}, {"ok", std::labs(mine - ref) <= 1}};
}

// [2], [3] and [4] for one model.
json study_model(const Options& o, const std::string& model, const Ceilings& roof, bool& ok) {
    cli::CommonOptions lo = o.lab;
    lo.model = model;
    cli::Session s = cli::load_session(lo);
    const Config c = s.loaded.model->config;
    const Precision p = cli::precision_of(o.lab);
    if (o.prompt_len + o.gen > c.max_seq_len)
        fail("--prompt-len {} plus --gen {} exceed the context of {} ({} positions): make them smaller", o.prompt_len,
             o.gen, model, c.max_seq_len);
    std::printf("\n=== %s: %d layers, dim %d, %d heads / %d KV heads, %.1f M matrix weights\n", model.c_str(),
                c.n_layers, c.dim, c.n_heads, c.n_kv_heads, double(c.n_matmul_params()) / 1e6);
    ok = show_counts(o, c, model, p) && ok;
    json points = measure_model(s, o, model, roof);
    json turn = turning_point(c, p, o.prompt_len + (o.gen + 1) / 2.0, roof);
    ok = turn["ok"].get<bool>() && ok;
    return {{"model", model}, {"points", points}, {"turn", turn}};
}

// --- the program ---------------------------------------------------------------------------

void check_options(const Options& o) {
    if (o.lab.device != "cpu")
        fail("lab 10 measures the CPU's ceilings and places CPU runs under them: use --device cpu "
             "(docs/gpu.md sets the GPU's phases against its own floors)");
    if (o.batches.empty()) fail("--batches needs at least one batch size, e.g. --batches 1,4,16");
}

// Your four functions once on a small shape: a missing one stops the lab here,
// not after a minute of measuring.
void try_exercises(Precision p) {
    Config c;
    c.dim = 64, c.hidden_dim = 128, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32, c.vocab_size = 10;
    count_matmul("qkv", 1, 4, 4, p);
    count_phase(c, {Phase::decode, p, 1, 0, 1.0});
    attainable_gflops(1, 1, 1);
    compute_bound_batch(c, p, 1, 1);
}

int run(const Options& o) {
    check_options(o);
    const Precision p = cli::precision_of(o.lab);
    cli::apply_runtime(o.lab);
    try_exercises(p);
    const fs::path dir = lab::make_out_dir(o.out);
    std::printf("Lab 10: the roofline\nhardware %s\n", cpu_summary().c_str());
    json j{{"lab", "10-roofline"}, {"hardware", cpu_summary()}, {"threads", omp_get_max_threads()},
           {"precision", o.lab.precision}, {"prompt_len", o.prompt_len}, {"gen", o.gen}};
    const Ceilings roof = measure_machine(o, p, j);
    std::vector<std::string> models{o.lab.model};
    if (o.synthetic != "none") models.push_back(o.synthetic);
    bool ok = true;
    for (const std::string& m : models) j["models"].push_back(study_model(o, m, roof, ok));
    cli::write_json_file((dir / "roofline.json").string(), j);
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track3/10-roofline", dir, o.no_plot, "roofline.png and .svg");
    return lab::finish(ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
        "Lab 10: the roofline. A kernel doing F FLOPs while moving B bytes to or from DRAM takes\n"
        "at least max(F / peak, B / bandwidth); its intensity F / B says which term wins.\n"
        "  [1] measures this machine's two ceilings (DRAM read bandwidth, oneDNN's matrix peak)\n"
        "      and the ridge point peak / bandwidth between them\n"
        "  [2] prints your FLOPs and bytes of every product of a prefill and a decode step\n"
        "      (count_phase) next to the engine's own accounting\n"
        "  [3] times real prefill and decode of --model and --synthetic and places each run at\n"
        "      your counted intensity and its measured GFLOP/s, under your roof\n"
        "  [4] your batch at which decode turns compute-bound (compute_bound_batch)\n"
        "Writes --out/roofline.json; plot.py draws --out/roofline.png with the ridge and the turn.\n"
        "About a minute on 2 cores with the defaults. Example:\n"
        "  ./kit run 10 --threads 2 --batches 1,8,32",
        "10-roofline");
    cl.common(o.lab);
    cl.option("--synthetic", o.synthetic, "a second model to place, or none").show_default();
    cl.option("--prompt-len,-P", o.prompt_len, "prompt length of prefill; decode runs after it")
        .range(1, 1 << 20).show_default();
    cl.option("--batches", o.batches, "decode batch sizes to time, e.g. 1,4,16").list().range(1, 1024).show_default();
    cl.option("--gen,-n", o.gen, "decode steps timed per run").range(1, 1 << 20).show_default();
    cl.option("--warmup", o.warmup, "untimed runs first").range(0, 100).show_default();
    cl.option("--repeats,-r", o.repeats, "timed runs (the median is used)").range(1, 1000).show_default();
    cl.option("--bandwidth-mib", o.bandwidth_mib, "buffer the bandwidth probe reads, in MiB (far above the last-level cache)")
        .range(64, 1 << 16).show_default();
    cl.option("--peak-n", o.peak_n, "M = N = K of the peak probe").range(256, 8192).show_default();
    cl.option("--seconds", o.seconds, "minimum seconds per ceiling probe").range(0.05, 60.0).show_default();
    cl.option("--out,-o", o.out, "folder for roofline.json and the plot").show_default();
    cl.flag("--no-plot", o.no_plot, "write the JSON only; print the command that draws it");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
