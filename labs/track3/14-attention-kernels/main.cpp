// Lab 14: naive attention (every score in memory) against a tiled,
// flash-style kernel (one tile of scores at a time, your tile update inside).
//
//   [1] check    both kernels on the same inputs agree (exit 1 if not)
//   [2] prefill  time and scratch of both against prompt length (T = S)
//   [3] decode   the same for one query over S cached keys
//   [4] tiles    the tiled kernel's time for several tile sizes at one length
//
// The inputs are random (no model): a small head count, the lengths of a long
// prompt. Each sweep writes a CSV into --out and plot.py draws it.
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
#include "kernels.hpp"
#include "lab_main.hpp"
#include "measure/hardware.hpp"
#include "measure/timing.hpp"
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

// Largest |tiled - naive| beyond atol + rtol * |naive|, as a ratio (<= 1: agree).
double disagreement(Problem& p, Tiles t) {
    run_kernel(p, false, t);
    const std::vector<float> naive = p.out;
    run_kernel(p, true, t);
    double worst = 0;
    for (std::size_t i = 0; i < naive.size(); i++) {
        const double err = std::fabs(double(p.out[i]) - naive[i]), tol = 2e-5 + 2e-4 * std::fabs(naive[i]);
        worst = std::max(worst, std::isfinite(err) ? err / tol : INFINITY);
    }
    return worst;
}

// --- [1] check ----------------------------------------------------------------------

bool check_kernels(const Options& o, json& j) {
    std::printf("\n[1] your tiled kernel against the naive one (same inputs, atol 2e-5 + rtol 2e-4)\n");
    bool ok = true;
    for (auto [T, S] : {std::pair{300, 300}, std::pair{1, 1000}, std::pair{37, 501}}) {
        Problem p = make_problem(o, T, S);
        const double worst = disagreement(p, o.tiles);
        ok = ok && worst <= 1;
        std::printf("  %4d queries over %4d keys: worst error / tolerance %.3f  %s\n", T, S, worst,
                    worst <= 1 ? "ok" : "MISMATCH");
        j.push_back({{"T", T}, {"S", S}, {"worst_over_tolerance", worst}, {"ok", worst <= 1}});
    }
    return ok;
}

// --- [2] and [3]: the length sweeps ---------------------------------------------------

struct Point {
    int length;
    Stats naive, tiled;
    std::size_t naive_bytes, tiled_bytes;
};

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

json sweep_lengths(const Options& o, const fs::path& dir, bool decode) {
    const char* name = decode ? "decode" : "prefill";
    std::printf("\n[%d] %s: %s, %d heads / %d KV heads, D = %d, tiles %d x %d (median of %d%s)\n", decode ? 3 : 2,
                name, decode ? "one query over S cached keys" : "T = S queries, causal", o.heads, o.kv_heads,
                o.head_dim, o.tiles.Br, o.tiles.Bc, o.repeats,
                decode ? fmt::format(", {} calls each", o.decode_calls).c_str() : "");
    std::printf("  %6s %11s %11s %13s %15s %15s\n", "S", "naive ms", "tiled ms", "naive/tiled", "naive scratch",
                "tiled scratch");
    std::vector<Point> pts;
    json rows = json::array();
    for (int L : o.lengths) {
        std::fprintf(stderr, "%s: length %d...\n", name, L);
        const Point p = measure_point(o, L, decode);
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
    std::printf("  scratch is per thread (one head at a time): naive T x S floats, tiled Br x Bc floats + Br states\n");
    return rows;
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
    if (o.device != "cpu")
        fail("--device {}: lab 14 runs its kernels on the host CPU only; gpu/dev has no flash-attention twin "
             "yet. Use --device cpu", o.device);
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
    if (naive_gib > memory_gib() / 4)
        fail("the naive kernel would hold {:.1f} GiB of scores at length {} on {} threads, over a quarter of this "
             "machine's {:.0f} GiB: use shorter --lengths or fewer --threads", naive_gib, longest, o.threads,
             memory_gib());
}

json header(const Options& o, const fs::path& dir) {
    std::printf("Lab 14: attention kernels, naive against tiled (online softmax)\n");
    std::printf("hardware %s, kernels %s\n", cpu_summary().c_str(), kernel_isa().c_str());
    std::printf("timing   CPU monotonic clock (std::chrono::steady_clock) around each call; the median of "
                "--repeats runs\nresults  %s/ (CSV per sweep, plots drawn by plot.py)\n", dir.string().c_str());
    return {{"lab", "14-attention-kernels"}, {"hardware", cpu_summary()}, {"kernels", kernel_isa()},
            {"threads", o.threads}, {"heads", o.heads}, {"kv_heads", o.kv_heads}, {"head_dim", o.head_dim},
            {"Br", o.tiles.Br}, {"Bc", o.tiles.Bc}, {"warmup", o.warmup}, {"repeats", o.repeats}};
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
    omp_set_num_threads(o.threads);
    const fs::path dir = make_out_dir(o.out);
    json j = header(o, dir);
    j["check"] = json::array();
    const bool ok = check_kernels(o, j["check"]);  // a missing exercise stops the lab here (exit 3)
    if (wants(o, "prefill")) j["prefill"] = sweep_lengths(o, dir, false);
    if (wants(o, "decode")) j["decode"] = sweep_lengths(o, dir, true);
    if (wants(o, "tiles")) j["tiles"] = sweep_tiles(o, dir);
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
    app.add_option("--device", o.device, "cpu (the only one: no GPU twin of these kernels yet)")->capture_default_str();
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
        "Defaults: lengths 256 .. 8192, 4 heads / 2 KV heads of 64, 2 threads; about a minute.",
        "14-attention-kernels");
    add_options(app, o);
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
