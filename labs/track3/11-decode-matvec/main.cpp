// Lab 11: the decode matrix-vector product, four ways, against the speed limit.
//
//   [1] correct    each of your versions against a double-precision sum
//   [2] timed      every matrix of one decode step of a real model's shape
//                  (--shapes, f32), through each version and through the
//                  engine's kernel, against the floor: the weights' bytes over
//                  the DRAM bandwidth measured in the same run
//   [3] plugged in your best version (--kernel) as the products of a real
//                  decode; its tokens must be the engine's
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/isa.hpp"
#include "engine/matmul.hpp"
#include "exercise.hpp"
#include "lab11.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "measure/roofline.hpp"
#include "base/timing.hpp"
#include "print.hpp"

using namespace pd;
using namespace pd::lab11;
using nlohmann::json;

namespace {

std::vector<float> random_floats(std::size_t n, float scale, std::mt19937_64& rng) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// --- [1] correct ----------------------------------------------------------------------

// Largest error over |exact| + 1 of f on a rows x cols product, against a double sum.
double worst_error(Matvec f, int rows, int cols) {
    std::mt19937_64 rng(11);
    const auto W = random_floats(std::size_t(rows) * cols, 1.0f / std::sqrt(float(cols)), rng);
    const auto x = random_floats(cols, 1.0f, rng);
    std::vector<float> y(rows);
    f(W.data(), x.data(), y.data(), rows, cols);
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double exact = 0;
        for (int c = 0; c < cols; c++) exact += double(W[std::size_t(r) * cols + c]) * x[c];
        worst = std::max(worst, std::fabs(y[r] - exact) / (1.0 + std::fabs(exact)));
    }
    return worst;
}

bool check_versions(json& j) {
    std::printf("\n[1] each version against a double-precision sum (1e-5 allowed)\n");
    bool ok = true;
    for (const Version& v : kVersions) {
        double worst = 0;
        for (auto [rows, cols] : {std::pair{1283, 771}, {7, 33}, {1, 5}}) worst = std::max(worst, worst_error(v.f, rows, cols));
        const bool good = worst <= 1e-5;
        ok = ok && good;
        std::printf("  %-9s worst error %.2e %s\n", v.name, worst, good ? "ok" : "<-- WRONG: run the lab11 tests");
        j[v.name] = worst;
    }
    return ok;
}

// --- [2] timed against the floor -------------------------------------------------------

// The matrices of one decode step, in the order it runs them: row-major for
// your versions, and the same weights in the engine's panels.
struct StepMatrices {
    std::vector<std::vector<float>> rows;  // each (out, in)
    std::vector<Linear> panels;
    std::vector<std::pair<int, int>> shape;  // (out, in)
    double bytes = 0;
};

StepMatrices make_step(const Config& c) {
    const int D = c.dim, F = c.hidden_dim, mlp_in = c.mlp_in_rows();
    std::vector<std::pair<int, int>> layer = {{c.q_dim() + 2 * c.kv_dim(), D}, {D, c.q_dim()}, {mlp_in, D}, {D, F}};
    StepMatrices s;
    for (int l = 0; l < c.n_layers; l++) s.shape.insert(s.shape.end(), layer.begin(), layer.end());
    s.shape.push_back({c.vocab_size, D});
    std::mt19937_64 rng(7);
    for (auto [out, in] : s.shape) {
        s.rows.push_back(random_floats(std::size_t(out) * in, 1.0f / std::sqrt(float(in)), rng));
        s.panels.push_back(make_linear(s.rows.back(), {}, in, out, Precision::f32));
        s.bytes += 4.0 * out * in;
    }
    return s;
}

// Median ms of each step over `repeats` rounds, the steps taking turns within
// a round (after one untimed pass each): on a shared machine the load drifts,
// and taking turns spreads the drift over every version alike.
std::vector<double> time_in_turns(const std::vector<std::function<void()>>& steps, int repeats) {
    std::vector<std::vector<double>> ms(steps.size());
    for (const auto& step : steps) step();
    for (int r = 0; r < repeats; r++)
        for (std::size_t i = 0; i < steps.size(); i++) {
            const double t0 = now_ms();
            steps[i]();
            ms[i].push_back(now_ms() - t0);
        }
    std::vector<double> medians;
    for (const auto& v : ms) medians.push_back(percentile(v, 50));
    return medians;
}

void print_row(const char* name, double ms, double floor_ms, double bytes, json& rows) {
    std::printf("  %-36s %10.3f %10.1f %9.2fx\n", name, ms, bytes / (ms * 1e6), ms / floor_ms);
    rows.push_back({{"version", name}, {"ms", ms}, {"gbps", bytes / (ms * 1e6)}, {"x_floor", ms / floor_ms}});
}

json time_versions(const Options& o, bool& best_ok) {
    unsigned long long seed = 0;
    const Config c = synthetic_config(lab::synthetic_body(o.shapes), seed);
    std::fprintf(stderr, "making the matrices of %s...\n", o.shapes.c_str());
    const StepMatrices s = make_step(c);
    std::vector<float> x(std::max(c.dim, c.hidden_dim), 0.5f), y(std::max(c.vocab_size, 2 * c.hidden_dim + c.dim));
    const BandwidthResult before = quick_bandwidth(0.5);
    std::printf("\n[2] one decode step's products of %s: %zu matrices, %.1f MB of f32 weights, %d threads, %s kernels\n",
                o.shapes.c_str(), s.shape.size(), s.bytes / 1e6, omp_get_max_threads(), kernel_isa().c_str());
    std::printf("  %-36s %10s %10s %10s\n", "version", "ms/step", "GB/s", "x floor");
    json rows = json::array();
    std::vector<std::string> names;
    std::vector<std::function<void()>> steps;
    for (const Version& v : kVersions) {
        if (o.skip_naive && std::string(v.name) == "naive") continue;
        names.push_back(v.name);
        steps.push_back([&, f = v.f] {
            for (std::size_t i = 0; i < s.shape.size(); i++) f(s.rows[i].data(), x.data(), y.data(), s.shape[i].first, s.shape[i].second);
        });
    }
    names.push_back("engine (" + linear_impl_name(s.panels[0], 1) + ")");
    steps.push_back([&] {
        for (const Linear& L : s.panels) linear_small_m(L, x.data(), 1, y.data());
    });
    std::fprintf(stderr, "timing %zu versions, %d rounds...\n", steps.size(), o.repeats);
    const std::vector<double> ms = time_in_turns(steps, o.repeats);
    const BandwidthResult after = quick_bandwidth(0.5);
    const double gbps = std::max(before.best_gbps, after.best_gbps), floor_ms = s.bytes / (gbps * 1e6);
    for (std::size_t i = 0; i < ms.size(); i++) print_row(names[i].c_str(), ms[i], floor_ms, s.bytes, rows);
    print_row("floor: bytes / bandwidth", floor_ms, floor_ms, s.bytes, rows);
    std::printf("  bandwidth %.1f GB/s before the timings, %.1f after; the floor uses the better\n",
                before.best_gbps, after.best_gbps);
    const double simd_ms = ms[ms.size() - 2];  // the last of yours, before the engine's
    const auto fastest = std::min_element(ms.begin(), ms.end() - 1) - ms.begin();  // of yours
    best_ok = simd_ms <= 1.3 * floor_ms;
    std::printf("  your simd version: %.2fx the floor (target: within 1.3x), %.2fx the engine's kernel\n",
                simd_ms / floor_ms, simd_ms / ms.back());
    return {{"shapes", o.shapes}, {"bytes", s.bytes}, {"fastest", names[fastest]}, {"bandwidth_gbps", gbps}, {"floor_ms", floor_ms},
            {"versions", rows}, {"isa", kernel_isa()}};
}

// --- the program --------------------------------------------------------------------------

int run(const Options& o) {
    if (o.lab.device != "cpu") fail("lab 11's kernels run on the CPU: use --device cpu");
    if (o.shapes.rfind("synthetic:", 0) != 0)
        fail("--shapes {}: give a synthetic model's shape, e.g. synthetic:bench-llama-125m", o.shapes);
    pick_kernel(o.kernel);
    const cli::Session s = cli::load_session(o.lab);
    check_decodable(o, *s.loaded.model);
    std::printf("Lab 11: the decode matrix-vector product\nhardware %s, %s kernels\n", cpu_summary().c_str(),
                kernel_isa().c_str());
    json j{{"lab", "11-decode-matvec"}, {"hardware", cpu_summary()}, {"threads", omp_get_max_threads()}};
    const bool correct = check_versions(j["errors"]);
    bool near_floor = false, same = false;
    j["timed"] = time_versions(o, near_floor);
    j["decode"] = plugged_decode(o, *s.loaded.model, j["timed"]["fastest"].get<std::string>(), same);
    lab::write_lab_json(o.lab, j);
    if (!near_floor) std::printf("note: your simd version is more than 1.3x the floor (not a failed check: the machine may be busy)\n");
    return lab::finish(correct && same);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
        "Lab 11: the decode product y = W x, four ways, against the speed limit.\n"
        "At batch 1 every weight is used once, so a decode step can go no faster than streaming\n"
        "all weights from DRAM: the floor, bytes / bandwidth, measured in the same run.\n"
        "  [1] checks each of your versions (naive, unrolled, threads, simd) against a double sum\n"
        "  [2] times every matrix of one decode step of --shapes (f32) through each version and\n"
        "      the engine's kernel, against the floor\n"
        "  [3] runs a real decode of --model with your --kernel doing every product: the tokens\n"
        "      must be the engine's\n"
        "PDLAB_ISA=avx2 (or scalar) runs the SIMD kernels of a lesser CPU (pdlab isa lists them).\n"
        "Example: ./kit run 11 --threads 2 --skip-naive",
        "11-decode-matvec");
    cl.common(o.lab);
    cl.option("--shapes", o.shapes, "the synthetic model whose matrices [2] times").show_default();
    cl.option("--kernel", o.kernel, "your version [3] decodes with: fastest (in [2]), naive, unrolled, threads, simd")
        .show_default();
    cl.option("--repeats,-r", o.repeats, "timed passes per version in [2] (the median is shown)")
        .range(1, 1000).show_default();
    cl.option("--steps", o.steps, "greedy decode steps in [3]").range(1, 100000).show_default();
    cl.flag("--skip-naive", o.skip_naive, "leave the naive loop out of [2] (it is slow)");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
