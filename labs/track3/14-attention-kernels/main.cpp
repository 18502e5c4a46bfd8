// Lab 14: naive attention (every score in memory) against a tiled,
// flash-style kernel (one tile of scores at a time, your tile update inside).
//
//   [1] check    both kernels on the same inputs agree (exit 1 if not)
//   [2] prefill  time and scratch of both against prompt length (T = S)
//   [3] decode   the same for one query over S cached keys
//   [4] tiles    the tiled kernel's time for several tile sizes at one length
//
// The inputs are random (no model): a small head count, the lengths of a long
// prompt. Each sweep writes a CSV into --out and plot.py draws it. With
// --device cuda (or both) the GPU pair of gpu/attention_pair.cuh runs the same
// check and sweeps (gpu_pair.hpp), into *_gpu.csv.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "engine/isa.hpp"
#include "exercise.hpp"
#include "gpu_pair.hpp"
#include "kernels.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "base/timing.hpp"
#include "plot.hpp"
#include "print.hpp"

using namespace pd;
using namespace pd::lab14;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Options {
    std::vector<int> lengths = {256, 512, 1024, 2048, 4096, 8192};
    std::vector<std::string> sweeps = {"prefill", "decode", "tiles"};
    int heads = 4, kv_heads = 2, head_dim = 64;
    Tiles tiles;
    int tile_length = 2048;
    int threads = 2;
    int warmup = 1, repeats = 3, decode_calls = 20;
    std::uint64_t seed = 14;
    std::string device = "cpu", out = "lab14-results", json;
    bool no_plot = false;
};

// Random q, K, V of one attention call.
struct Problem {
    AttentionShape shape;
    std::vector<float> q, K, V, out;
};

Problem make_problem(const Options& o, int T, int S) {
    Problem p{{T, S, o.heads, o.kv_heads, o.head_dim}, {}, {}, {}, {}};
    std::mt19937_64 rng(o.seed + std::uint64_t(T) * 131 + std::uint64_t(S));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, std::size_t n) {
        v.resize(n);
        for (float& x : v) x = normal(rng);
    };
    fill(p.q, std::size_t(T) * o.heads * o.head_dim);
    fill(p.K, std::size_t(o.kv_heads) * S * o.head_dim);
    fill(p.V, p.K.size());
    p.out.resize(p.q.size());
    return p;
}

std::size_t run_kernel(Problem& p, bool tiled, Tiles t) {
    return tiled ? tiled_attention(p.out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape, t)
                 : naive_attention(p.out.data(), p.q.data(), p.K.data(), p.V.data(), p.shape);
}

// ms per call of one run of `calls` calls.
double time_calls(Problem& p, bool tiled, Tiles t, int calls) {
    const double t0 = now_ms();
    for (int c = 0; c < calls; c++) run_kernel(p, tiled, t);
    return (now_ms() - t0) / calls;
}

// The naive and the tiled kernel's ms per call over --repeats timed runs after
// --warmup. Their runs alternate, so that a neighbour's load on a shared
// machine falls on both alike and their ratio stays honest.
std::pair<Stats, Stats> time_both(const Options& o, Problem& p, Tiles t, int calls) {
    std::vector<double> naive, tiled;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const double n = time_calls(p, false, t, calls), f = time_calls(p, true, t, calls);
        if (run >= o.warmup) naive.push_back(n), tiled.push_back(f);
    }
    return {summarize(naive), summarize(tiled)};
}

Stats time_tiled(const Options& o, Problem& p, Tiles t) {
    std::vector<double> ms;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const double f = time_calls(p, true, t, 1);
        if (run >= o.warmup) ms.push_back(f);
    }
    return summarize(ms);
}

// Largest |got - ref| beyond atol + rtol * |ref|, as a ratio (<= 1: agree).
double worst_over_tolerance(const std::vector<float>& got, const std::vector<float>& ref, double atol,
                            double rtol) {
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); i++) {
        const double err = std::fabs(double(got[i]) - ref[i]), tol = atol + rtol * std::fabs(ref[i]);
        worst = std::max(worst, std::isfinite(err) ? err / tol : INFINITY);
    }
    return worst;
}

// The tiled kernel against the naive one on the same inputs.
double disagreement(Problem& p, Tiles t) {
    run_kernel(p, false, t);
    const std::vector<float> naive = p.out;
    run_kernel(p, true, t);
    return worst_over_tolerance(p.out, naive, 2e-5, 2e-4);
}

// The queries and keys of the check: a prompt, a decode step, queries after a cache.
const std::pair<int, int> kCheckShapes[] = {{300, 300}, {1, 1000}, {37, 501}};

bool on_cpu(const Options& o) { return o.device != "cuda"; }
bool on_gpu(const Options& o) { return o.device != "cpu"; }

// --- [1] check ----------------------------------------------------------------------

bool check_kernels(const Options& o, json& j) {
    std::printf("\n[1] your tiled kernel against the naive one (same inputs, atol 2e-5 + rtol 2e-4)\n");
    bool ok = true;
    for (auto [T, S] : kCheckShapes) {
        Problem p = make_problem(o, T, S);
        const double worst = disagreement(p, o.tiles);
        ok = ok && worst <= 1;
        std::printf("  %4d queries over %4d keys: worst error / tolerance %.3f  %s\n", T, S, worst,
                    worst <= 1 ? "ok" : "MISMATCH");
        j.push_back({{"T", T}, {"S", S}, {"worst_over_tolerance", worst}, {"ok", worst <= 1}});
    }
    return ok;
}

// The problem's inputs as the GPU pair reads them: rounded to bf16 (kept in f32).
Problem rounded_to_bf16(Problem p) {
    for (std::vector<float>* v : {&p.q, &p.K, &p.V})
        for (float& x : *v) x = bf16_to_f32(f32_to_bf16(x));
    return p;
}

// The GPU pair against this CPU's naive kernel on the same bf16-rounded
// inputs: the GPU's naive kernel sums in f32 as the CPU's does; the tiled one
// also rounds its probabilities to bf16 for the tensor cores (2^-9 relative).
bool check_gpu_pair(const Options& o, json& j) {
    std::printf("\n[1] the GPU pair against the CPU naive kernel (inputs rounded to bf16 for all three; "
                "naive atol 5e-5 + rtol 5e-4, tiled 1e-2 + 1e-2)\n");
    bool ok = true;
    for (auto [T, S] : kCheckShapes) {
        Problem p = rounded_to_bf16(make_problem(o, T, S));
        run_kernel(p, false, o.tiles);
        const GpuPair g = run_gpu_pair(p.shape, p.q, p.K, p.V, 0, 1, 1);
        const double naive = worst_over_tolerance(g.naive_out, p.out, 5e-5, 5e-4);
        const double tiled = worst_over_tolerance(g.tiled_out, p.out, 1e-2, 1e-2);
        const bool agree = naive <= 1 && tiled <= 1;
        ok = ok && agree;
        std::printf("  %4d queries over %4d keys: worst error / tolerance: GPU naive %.3f, GPU tiled %.3f  %s\n",
                    T, S, naive, tiled, agree ? "ok" : "MISMATCH");
        j.push_back({{"T", T}, {"S", S}, {"naive_worst_over_tolerance", naive},
                     {"tiled_worst_over_tolerance", tiled}, {"ok", agree}});
    }
    return ok;
}

// --- [2] and [3]: the length sweeps ---------------------------------------------------

struct Point {
    int length;
    Stats naive, tiled;
    std::size_t naive_bytes, tiled_bytes;
};

// One length on the GPU: the same problem, the GPU pair.
Point measure_gpu_point(const Options& o, int L, bool decode) {
    const Problem p = make_problem(o, decode ? 1 : L, L);
    const GpuPair g = run_gpu_pair(p.shape, p.q, p.K, p.V, o.warmup, o.repeats, decode ? o.decode_calls : 1);
    return {L, g.naive_ms, g.tiled_ms, g.naive_bytes, g.tiled_bytes};
}

Point measure_point(const Options& o, int L, bool decode) {
    Problem p = make_problem(o, decode ? 1 : L, L);
    const int calls = decode ? o.decode_calls : 1;
    const auto [naive, tiled] = time_both(o, p, o.tiles, calls);
    Point pt{L, naive, tiled, 0, 0};
    pt.naive_bytes = run_kernel(p, false, o.tiles);
    pt.tiled_bytes = run_kernel(p, true, o.tiles);
    return pt;
}

void write_csv(const fs::path& file, const std::vector<Point>& pts) {
    std::ofstream f(file);
    if (!f) fail("cannot write {}: check that --out is a writable folder", file.string());
    f << "length,naive_ms,naive_p90_ms,tiled_ms,tiled_p90_ms,naive_scratch_bytes,tiled_scratch_bytes\n";
    for (const Point& p : pts)
        f << fmt::format("{},{:.6g},{:.6g},{:.6g},{:.6g},{},{}\n", p.length, p.naive.median, p.naive.p90,
                         p.tiled.median, p.tiled.p90, p.naive_bytes, p.tiled_bytes);
}

// Medians resist a few slow runs; when p90 sits far above the median,
// something else is using the cores, and the ratio of one row says more than its times.
void noise_note(const std::vector<Point>& pts) {
    int noisy = 0;
    for (const Point& p : pts) noisy += p.naive.p90 > 1.25 * p.naive.median || p.tiled.p90 > 1.25 * p.tiled.median;
    if (noisy)
        std::printf("  note: %d of %zu rows are noisy (p90 more than 25%% above the median): other programs share "
                    "these cores;\n  trust the ratios more than the times, or try --threads 1 and more "
                    "--repeats\n",
                    noisy, pts.size());
}

// One length sweep on the CPU or (gpu) the GPU; name.csv or name_gpu.csv.
json sweep_lengths(const Options& o, const fs::path& dir, bool decode, bool gpu) {
    const std::string name = std::string(decode ? "decode" : "prefill") + (gpu ? "_gpu" : "");
    const Tiles tiles = gpu ? gpu_tiles() : o.tiles;
    std::printf("\n[%d] %s%s: %s, %d heads / %d KV heads, D = %d, tiles %d x %d (median of %d%s)\n", decode ? 3 : 2,
                decode ? "decode" : "prefill", gpu ? " on the GPU (bf16 inputs)" : "",
                decode ? "one query over S cached keys" : "T = S queries, causal", o.heads, o.kv_heads, o.head_dim,
                tiles.Br, tiles.Bc, o.repeats, decode ? fmt::format(", {} calls each", o.decode_calls).c_str() : "");
    std::printf("  %6s %11s %11s %13s %15s %15s\n", "S", "naive ms", "tiled ms", "naive/tiled", "naive scratch",
                "tiled scratch");
    std::vector<Point> pts;
    json rows = json::array();
    for (int L : o.lengths) {
        std::fprintf(stderr, "%s: length %d...\n", name.c_str(), L);
        const Point p = gpu ? measure_gpu_point(o, L, decode) : measure_point(o, L, decode);
        pts.push_back(p);
        std::printf("  %6d %11.3f %11.3f %12.2fx %15s %15s\n", L, p.naive.median, p.tiled.median,
                    p.naive.median / p.tiled.median, lab::human_bytes(double(p.naive_bytes)).c_str(),
                    lab::human_bytes(double(p.tiled_bytes)).c_str());
        rows.push_back({{"length", L}, {"naive_ms", p.naive.median}, {"tiled_ms", p.tiled.median},
                        {"naive_p90_ms", p.naive.p90}, {"tiled_p90_ms", p.tiled.p90},
                        {"naive_scratch_bytes", p.naive_bytes}, {"tiled_scratch_bytes", p.tiled_bytes}});
    }
    write_csv(dir / fmt::format("{}.csv", name), pts);
    noise_note(pts);
    if (gpu)
        std::printf("  scratch: naive one head's T x S floats in GPU memory (every head's at once), tiled one "
                    "block's shared memory\n  (Br queries of one head: bf16 tiles of Q, K, V, f32 scores and "
                    "output, bf16 probabilities)\n");
    else
        std::printf("  scratch is per thread (one head at a time): naive T x S floats, tiled Br x Bc floats + Br "
                    "states\n");
    return rows;
}

// The sweep on each device --device names: j[name] (CPU) and j[name_gpu].
void sweep_devices(const Options& o, const fs::path& dir, bool decode, json& j) {
    const std::string name = decode ? "decode" : "prefill";
    if (on_cpu(o)) j[name] = sweep_lengths(o, dir, decode, false);
    if (on_gpu(o)) j[name + "_gpu"] = sweep_lengths(o, dir, decode, true);
}

// --- [4] tile sizes ----------------------------------------------------------------------

json sweep_tiles(const Options& o, const fs::path& dir) {
    const int L = o.tile_length;
    std::printf("\n[4] tile sizes: prefill of %d tokens, tiled kernel (median of %d)\n", L, o.repeats);
    std::printf("  %5s %5s %11s %15s\n", "Br", "Bc", "tiled ms", "scratch");
    Problem p = make_problem(o, L, L);
    std::ofstream f(dir / "tiles.csv");
    if (!f) fail("cannot write {}: check that --out is a writable folder", (dir / "tiles.csv").string());
    f << "Br,Bc,tiled_ms,scratch_bytes\n";
    json rows = json::array();
    for (Tiles t : {Tiles{o.tiles.Br, 16}, Tiles{o.tiles.Br, 32}, Tiles{o.tiles.Br, 64}, Tiles{o.tiles.Br, 128},
                    Tiles{o.tiles.Br, 512}, Tiles{1, o.tiles.Bc}, Tiles{4, o.tiles.Bc}, Tiles{64, o.tiles.Bc}}) {
        const Stats st = time_tiled(o, p, t);
        const std::size_t bytes = run_kernel(p, true, t);
        std::printf("  %5d %5d %11.3f %15s\n", t.Br, t.Bc, st.median, lab::human_bytes(double(bytes)).c_str());
        f << fmt::format("{},{},{:.6g},{}\n", t.Br, t.Bc, st.median, bytes);
        rows.push_back({{"Br", t.Br}, {"Bc", t.Bc}, {"tiled_ms", st.median}, {"scratch_bytes", bytes}});
    }
    return rows;
}

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

fs::path make_out_dir(const std::string& out) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec || !fs::is_directory(out)) fail("cannot create the output folder {}: {}", out, ec.message());
    return out;
}

bool wants(const Options& o, const char* sweep) {
    return std::find(o.sweeps.begin(), o.sweeps.end(), sweep) != o.sweeps.end();
}

int run(const Options& o) {
    check_options(o);
    const std::string card = on_gpu(o) ? require_gpu_pair(o.head_dim) : "";
    omp_set_num_threads(o.threads);
    const fs::path dir = make_out_dir(o.out);
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

void add_options(CLI::App& app, Options& o) {
    app.add_option("--lengths", o.lengths, "sequence lengths S of the prefill and decode sweeps")
        ->delimiter(',')->capture_default_str();
    app.add_option("--sweeps", o.sweeps, "which sweeps: prefill, decode, tiles")->delimiter(',')->capture_default_str();
    app.add_option("--heads", o.heads, "query heads")->capture_default_str();
    app.add_option("--kv-heads", o.kv_heads, "KV heads (GQA: heads / kv-heads queries share one)")
        ->capture_default_str();
    app.add_option("--head-dim", o.head_dim, "head dimension D")->capture_default_str();
    app.add_option("--br", o.tiles.Br, "tiled kernel: query rows per block")->capture_default_str();
    app.add_option("--bc", o.tiles.Bc, "tiled kernel: keys per tile")->capture_default_str();
    app.add_option("--tile-length", o.tile_length, "prompt length of the tile-size sweep")->capture_default_str();
    app.add_option("--threads", o.threads, "OpenMP threads (heads run in parallel)")->capture_default_str();
    app.add_option("--warmup", o.warmup, "untimed runs before each measurement")->capture_default_str();
    app.add_option("--repeats,-r", o.repeats, "timed runs per point (the median is reported)")->capture_default_str();
    app.add_option("--decode-calls", o.decode_calls, "decode calls per timed run (one is too short to time)")
        ->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the random q, K, V")->capture_default_str();
    app.add_option("--device", o.device, "cpu, cuda (the GPU pair of gpu/attention_pair.cuh) or both")
        ->capture_default_str();
    app.add_option("--out,-o", o.out, "folder for the CSV files and plots")->capture_default_str();
    app.add_option("--json", o.json, "also write every result here");
    app.add_flag("--no-plot", o.no_plot, "write the CSV files only; print the command that draws them");
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app(
        "Lab 14: the same attention computed two ways, on random inputs (no model needed).\n"
        "  naive  writes every score of a head to memory (T x S floats), softmaxes each row, then P V\n"
        "  tiled  flash-style: keys in tiles of --bc, queries in blocks of --br; each row keeps a running\n"
        "         max, sum and output (your tile_update), so only one tile of scores exists at a time\n"
        "[1] checks that they agree, [2] times both for prefill and [3] for decode against the length,\n"
        "with the scratch bytes each allocates, [4] times the tiled kernel for several tile sizes.\n"
        "--device cuda or both: the same pair on the GPU (bf16 inputs; the tiled one on tensor cores).\n"
        "Defaults: lengths 256 .. 8192, 4 heads / 2 KV heads of 64, 2 threads; about a minute.",
        "14-attention-kernels");
    add_options(app, o);
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
