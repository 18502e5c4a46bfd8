// Lab 14: naive attention (every score in memory) against your tiled,
// flash-style kernel (one tile of scores at a time).
//
//   [1] check    both kernels on the same inputs agree (exit 1 if not)
//   [2] prefill  time and scratch of both against prompt length (T = S)
//   [3] decode   the same for one query over S cached keys
//   [4] tiles    your kernel's time and scratch for several tile sizes at one
//                length, beside the naive kernel's there
//
// The inputs are random (no model): a small head count, the lengths of a long
// prompt. Each sweep writes a CSV into --out and plot.py draws it. With
// --device cuda (or both) the GPU pair of gpu/kernels/attention_pair.cuh runs the same
// check and sweeps (gpu_pair.hpp), into *_gpu.csv.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/isa.hpp"
#include "gpu_pair.hpp"
#include "lab14.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "plot.hpp"
#include "results.hpp"

using namespace pd;
using namespace pd::lab14;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// --- options, main ------------------------------------------------------------------------

void check_options(const Options& o) {
    if (o.device != "cpu" && o.device != "cuda" && o.device != "both")
        fail("--device {}: use cpu, cuda or both", o.device);
    if (o.threads < 1) fail("--threads must be at least 1, got {}", o.threads);
    if (o.heads < 1 || o.kv_heads < 1 || o.heads % o.kv_heads)
        fail("--heads {} and --kv-heads {}: both at least 1, heads a multiple of kv-heads", o.heads, o.kv_heads);
    if (o.head_dim < 1 || o.head_dim > 512) fail("--head-dim must be in 1 .. 512, got {}", o.head_dim);
    if (o.tiles.Br < 1 || o.tiles.Br > 1024 || o.tiles.Bc < 1 || o.tiles.Bc > 4096)
        fail("--br must be in 1 .. 1024 and --bc in 1 .. 4096, got {} and {}", o.tiles.Br, o.tiles.Bc);
    if (o.warmup < 0 || o.repeats < 1 || o.decode_calls < 1)
        fail("--warmup >= 0, --repeats >= 1 and --decode-calls >= 1, got {}, {}, {}", o.warmup, o.repeats,
             o.decode_calls);
    for (const std::string& s : o.sweeps)
        if (s != "prefill" && s != "decode" && s != "tiles")
            fail("unknown sweep \"{}\" in --sweeps: use prefill, decode, tiles", s);
    if (o.lengths.empty()) fail("--lengths is empty: give at least one length, e.g. --lengths 1024,2048");
    const int longest = std::max(o.tile_length, *std::max_element(o.lengths.begin(), o.lengths.end()));
    if (*std::min_element(o.lengths.begin(), o.lengths.end()) < 1 || o.tile_length < 1 || longest > 16384)
        fail("--lengths and --tile-length must be in 1 .. 16384 (the naive kernel's T x S scores grow as "
             "the square); got up to {}", longest);
    const double naive_gib = double(longest) * longest * 4 * std::min(o.threads, o.heads) / (1 << 30);
    if (on_cpu(o) && naive_gib > memory_gib() / 4)
        fail("the naive kernel would hold {:.1f} GiB of scores at length {} on {} threads, over a quarter of this "
             "machine's {:.0f} GiB: use shorter --lengths or fewer --threads", naive_gib, longest, o.threads,
             memory_gib());
}

// card: the GPU's description, empty on --device cpu.
json header(const Options& o, const fs::path& dir, const std::string& card) {
    std::printf("Lab 14: attention kernels, naive against tiled (online softmax)\n");
    std::printf("hardware %s, kernels %s\n", cpu_summary().c_str(), kernel_isa().c_str());
    if (!card.empty()) std::printf("GPU      %s\n", card.c_str());
    std::printf("timing   CPU monotonic clock (std::chrono::steady_clock) around each call; the median of "
                "--repeats runs\n");
    if (!card.empty())
        std::printf("         GPU: CUDA events around each run of calls, read after the GPU reached the second\n");
    std::printf("results  %s/ (CSV per sweep, plots drawn by plot.py)\n", dir.string().c_str());
    return {{"lab", "14-attention-kernels"}, {"hardware", cpu_summary()}, {"kernels", kernel_isa()},
            {"device", o.device}, {"gpu", card}, {"threads", o.threads}, {"heads", o.heads},
            {"kv_heads", o.kv_heads}, {"head_dim", o.head_dim}, {"Br", o.tiles.Br}, {"Bc", o.tiles.Bc},
            {"warmup", o.warmup}, {"repeats", o.repeats}};
}
bool wants(const Options& o, const char* sweep) {
    return std::find(o.sweeps.begin(), o.sweeps.end(), sweep) != o.sweeps.end();
}

int run(const Options& o) {
    check_options(o);
    const std::string card = on_gpu(o) ? require_gpu_pair(o.head_dim) : "";
    omp_set_num_threads(o.threads);
    const fs::path dir = lab::make_out_dir(o.out);
    json j = header(o, dir, card);
    bool ok = true;
    if (on_cpu(o)) ok = check_kernels(o, j["check"]);  // a missing exercise stops the lab here (exit 3)
    if (on_gpu(o)) ok = check_gpu_pair(o, j["check_gpu"]) && ok;
    if (wants(o, "prefill")) sweep_devices(o, dir, false, j);
    if (wants(o, "decode")) sweep_devices(o, dir, true, j);
    if (wants(o, "tiles") && on_cpu(o)) j["tiles"] = sweep_tiles(o, dir);
    if (wants(o, "tiles") && !on_cpu(o))
        std::printf("\n[4] tile sizes: CPU only (the GPU kernel's tiles are compile-time constants); "
                    "--device both runs it\n");
    if (!o.json.empty()) cli::write_json_file(o.json, j);
    lab::draw_plot("labs/track3/14-attention-kernels", dir, o.no_plot,
                   "prefill, decode and tiles, each .png and .svg");
    return lab::finish(ok);
}

void add_options(lab::CommandLine& cl, Options& o) {
    cl.option("--lengths", o.lengths, "sequence lengths S of the prefill and decode sweeps").list().show_default();
    cl.option("--sweeps", o.sweeps, "which sweeps: prefill, decode, tiles").list().show_default();
    cl.option("--heads", o.heads, "query heads").show_default();
    cl.option("--kv-heads", o.kv_heads, "KV heads (GQA: heads / kv-heads queries share one)").show_default();
    cl.option("--head-dim", o.head_dim, "head dimension D").show_default();
    cl.option("--br", o.tiles.Br, "tiled kernel: query rows per block").show_default();
    cl.option("--bc", o.tiles.Bc, "tiled kernel: keys per tile").show_default();
    cl.option("--tile-length", o.tile_length, "prompt length of the tile-size sweep").show_default();
    cl.option("--threads", o.threads, "OpenMP threads (heads run in parallel)").show_default();
    cl.option("--warmup", o.warmup, "untimed runs before each measurement").show_default();
    cl.option("--repeats,-r", o.repeats, "timed runs per point (the median is reported)").show_default();
    cl.option("--decode-calls", o.decode_calls, "decode calls per timed run (one is too short to time)").show_default();
    cl.option("--seed", o.seed, "seed of the random q, K, V").show_default();
    cl.option("--device", o.device, "cpu, cuda (the GPU pair of gpu/kernels/attention_pair.cuh) or both").show_default();
    cl.option("--out,-o", o.out, "folder for the CSV files and plots").show_default();
    cl.option("--json", o.json, "also write every result here");
    cl.flag("--no-plot", o.no_plot, "write the CSV files only; print the command that draws them");
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
        "Lab 14: the same attention computed two ways, on random inputs (no model needed).\n"
        "  naive  writes every score of a head to memory (T x S floats), softmaxes each row, then P V\n"
        "  tiled  yours, flash-style: keys in tiles of --bc, queries in blocks of --br; each row keeps a\n"
        "         running max, sum and output, so only one tile of scores exists at a time\n"
        "[1] checks that they agree, [2] times both for prefill and [3] for decode against the length,\n"
        "with the scratch bytes each allocates, [4] times yours for several tile sizes beside the naive one.\n"
        "--device cuda or both: the same pair on the GPU (bf16 inputs; the tiled one on tensor cores).\n"
        "Defaults: lengths 256 .. 8192, 4 heads / 2 KV heads of 64, 2 threads; about a minute.",
        "14-attention-kernels");
    add_options(cl, o);
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
