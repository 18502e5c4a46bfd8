// Lab 14's measurements: random problems, the check of your tiled kernel
// (through tiled_attention, on every head) against the naive one, and the
// sweeps over lengths and tile sizes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "gpu_pair.hpp"
#include "lab14.hpp"
#include "base/timing.hpp"
#include "print.hpp"

namespace pd::lab14 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

// One kernel's ms per call (one call a run) over --repeats timed runs after --warmup.
Stats time_one(const Options& o, Problem& p, bool tiled, Tiles t) {
    std::vector<double> ms;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const double f = time_calls(p, tiled, t, 1);
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

}  // namespace

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

namespace {

// The problem's inputs as the GPU pair reads them: rounded to bf16 (kept in f32).
Problem rounded_to_bf16(Problem p) {
    for (std::vector<float>* v : {&p.q, &p.K, &p.V})
        for (float& x : *v) x = bf16_to_f32(f32_to_bf16(x));
    return p;
}

}  // namespace

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

namespace {

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

}  // namespace

// The sweep on each device --device names: j[name] (CPU) and j[name_gpu].
void sweep_devices(const Options& o, const fs::path& dir, bool decode, json& j) {
    const std::string name = decode ? "decode" : "prefill";
    if (on_cpu(o)) j[name] = sweep_lengths(o, dir, decode, false);
    if (on_gpu(o)) j[name + "_gpu"] = sweep_lengths(o, dir, decode, true);
}

// --- [4] tile sizes ----------------------------------------------------------------------

// Your kernel for several tile shapes at one length, beside the naive kernel's
// time and scratch at that length (one line above the table, a column of the CSV).
json sweep_tiles(const Options& o, const fs::path& dir) {
    const int L = o.tile_length;
    std::printf("\n[4] tile sizes: prefill of %d tokens, your tiled kernel (median of %d)\n", L, o.repeats);
    Problem p = make_problem(o, L, L);
    const Stats naive = time_one(o, p, false, o.tiles);
    const std::size_t naive_bytes = run_kernel(p, false, o.tiles);
    std::printf("  the naive kernel at this length: %.3f ms, scratch %s\n", naive.median,
                lab::human_bytes(double(naive_bytes)).c_str());
    std::printf("  %5s %5s %11s %15s\n", "Br", "Bc", "tiled ms", "scratch");
    std::ofstream f(dir / "tiles.csv");
    if (!f) fail("cannot write {}: check that --out is a writable folder", (dir / "tiles.csv").string());
    f << "Br,Bc,tiled_ms,scratch_bytes,naive_ms,naive_scratch_bytes\n";
    json rows = json::array();
    for (Tiles t : {Tiles{o.tiles.Br, 16}, Tiles{o.tiles.Br, 32}, Tiles{o.tiles.Br, 64}, Tiles{o.tiles.Br, 128},
                    Tiles{o.tiles.Br, 512}, Tiles{1, o.tiles.Bc}, Tiles{4, o.tiles.Bc}, Tiles{64, o.tiles.Bc}}) {
        const Stats st = time_one(o, p, true, t);
        const std::size_t bytes = run_kernel(p, true, t);
        std::printf("  %5d %5d %11.3f %15s\n", t.Br, t.Bc, st.median, lab::human_bytes(double(bytes)).c_str());
        f << fmt::format("{},{},{:.6g},{},{:.6g},{}\n", t.Br, t.Bc, st.median, bytes, naive.median, naive_bytes);
        rows.push_back({{"Br", t.Br}, {"Bc", t.Bc}, {"tiled_ms", st.median}, {"scratch_bytes", bytes},
                        {"naive_ms", naive.median}, {"naive_scratch_bytes", naive_bytes}});
    }
    return rows;
}

}  // namespace pd::lab14
