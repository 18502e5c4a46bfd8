// Lab 05: how prompt length, cache length, output length and batch size move
// the two phases. Four sweeps, each written to a CSV file and drawn by plot.py:
//
//   prefill  prefill time against prompt length P, with your least-squares fit
//            c0 + a*P + b*P^2 splitting the matrix products (a*P) from
//            attention (b*P^2)
//   decode   one decode step's time against the cache length it reads
//   output   total generation time against the number of output tokens
//   batch    B sequences: prefill throughput, and decode steps that serve all B
//            at once through your batched_decode_step()
//   ragged   the engine's decode attention over B caches of different
//            lengths, timed with each row's own length and padded to the longest
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab_main.hpp"
#include "base/timing.hpp"
#include "plot.hpp"
#include "print.hpp"
#include "results.hpp"
#include "sweeps.hpp"

using namespace pd;
using namespace pd::lab05;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Keeps the values in [lo, hi], sorted and unique; says which were dropped.
std::vector<int> fit_range(std::vector<int> v, int lo, int hi, const char* what) {
    std::set<int> keep;
    std::vector<int> dropped;
    for (int x : v) {
        if (x >= lo && x <= hi) keep.insert(x);
        else dropped.push_back(x);
    }
    if (!dropped.empty())
        std::fprintf(stderr, "note: %s %s left out: this model allows %d to %d\n", what,
                     lab::id_list(dropped).c_str(), lo, hi);
    return {keep.begin(), keep.end()};
}

std::vector<int> doubling(int from, int to) {
    std::vector<int> v;
    for (int x = from; x <= to; x *= 2) v.push_back(x);
    return v;
}

const char* kSweeps[] = {"prefill", "decode", "output", "batch", "ragged"};

std::set<std::string> check_options(const Options& o) {
    if (o.warmup < 0) fail("--warmup must be >= 0, got {}", o.warmup);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (o.output_prompt_len < 1) fail("--output-prompt-len must be at least 1, got {}", o.output_prompt_len);
    if (o.batch_prompt_len < 1) fail("--batch-prompt-len must be at least 1, got {}", o.batch_prompt_len);
    std::set<std::string> want(o.sweeps.begin(), o.sweeps.end());
    for (auto& w : want)
        if (std::find(std::begin(kSweeps), std::end(kSweeps), w) == std::end(kSweeps))
            fail("unknown sweep \"{}\" in --sweeps: use prefill, decode, output, batch, ragged", w);
    return want;
}

// Your two functions, once on tiny inputs before any long sweep: a missing
// exercise stops the lab here, not after minutes of measuring.
void try_exercises(Engine& e) {
    int tok = 0;
    e.reset(0);
    e.prefill(0, {&tok, 1});
    Batch one{{0}, {tok}, {1}};
    batched_decode_step(e, one);
    e.reset(0);
    std::vector<double> x = {1, 2, 3}, y = {1, 4, 9};
    fit_linear_quadratic(x, y);
}

// The sweep points: small by default, --full for more, or given exactly.
struct Points {
    std::vector<int> prompt_lens, cache_lens, output_lens, batches;
};

Points choose_points(Options& o, int ctx, const std::set<std::string>& want) {
    const int steps_room = (o.warmup + o.repeats) * o.steps + 1;
    if (o.prompt_lens.empty())
        o.prompt_lens = o.full ? doubling(32, 4096) : std::vector<int>{32, 64, 128, 192, 256, 384, 512};
    if (o.cache_lens.empty())
        o.cache_lens = o.full ? doubling(16, 4096) : std::vector<int>{16, 64, 128, 256, 384, 448};
    if (o.output_lens.empty())
        o.output_lens = o.full ? std::vector<int>{1, 16, 32, 64, 128, 256, 512} : std::vector<int>{1, 8, 16, 32, 64};
    if (o.batches.empty()) o.batches = o.full ? std::vector<int>{1, 2, 4, 8, 16, 24, 32} : std::vector<int>{1, 2, 4, 8, 16};
    Points p{fit_range(o.prompt_lens, 1, ctx, "prompt lengths"),
             fit_range(o.cache_lens, 1, ctx - steps_room, "cache lengths"),
             fit_range(o.output_lens, 1, ctx - o.output_prompt_len, "output lengths"),
             fit_range(o.batches, 1, 1024, "batch sizes")};
    if (o.steps >= ctx) fail("--steps {} leaves no room for a prompt in the context length of {}", o.steps, ctx);
    if (o.batch_prompt_len + o.steps > ctx) {
        std::fprintf(stderr, "note: --batch-prompt-len %d plus --steps %d exceed the context length of %d; "
                     "using prompts of %d tokens\n", o.batch_prompt_len, o.steps, ctx, ctx - o.steps);
        o.batch_prompt_len = ctx - o.steps;
    }
    if (want.count("prefill") && p.prompt_lens.size() < 3)
        fail("the prefill sweep needs at least 3 prompt lengths that fit the context of {}", ctx);
    return p;
}

json print_header(const Options& o, Engine& e, const fs::path& dir) {
    const Config& c = e.config();
    std::printf("Lab 05: prompt length, output length and batch size\n");
    std::printf("model    %s (%s, %d layers, dim %d, %d heads / %d KV heads, context %d), %s, %s\n",
                o.lab.model.c_str(), family_name(c.family), c.n_layers, c.dim, c.n_heads, c.n_kv_heads,
                e.max_seq(), o.lab.precision.c_str(), device_name(e.device()));
    std::printf("hardware %s\ntiming   %s\n", e.hardware().c_str(), e.timing_method().c_str());
    std::printf("results  %s/ (CSV per sweep, plots drawn by plot.py)\n", dir.string().c_str());
    json j = lab::run_json("05-length-and-batch", o.lab, e);
    j["warmup"] = o.warmup;
    j["repeats"] = o.repeats;
    return j;
}

int run(Options& o) {
    const std::set<std::string> want = check_options(o);
    cli::Session s = cli::open_session(o.lab, 1, 0);
    Engine& e = *s.engine;
    try_exercises(e);
    const Points p = choose_points(o, e.max_seq(), want);
    const fs::path dir = lab::make_out_dir(o.out);
    json j = print_header(o, e, dir);
    const double t0 = now_ms();
    if (want.count("prefill")) j["prefill"] = sweep_prefill(s, o, dir, p.prompt_lens);
    if (want.count("decode") && !p.cache_lens.empty()) j["decode"] = sweep_decode(s, o, dir, p.cache_lens);
    if (want.count("output") && !p.output_lens.empty()) j["output"] = sweep_output(s, o, dir, p.output_lens);
    if (want.count("batch") && !p.batches.empty()) j["batch"] = sweep_batch(s, o, dir, p.batches);
    if (want.count("ragged")) j["ragged"] = ragged_batch(e.config(), o, e.max_seq());
    std::printf("\nall sweeps took %.1f s\n", (now_ms() - t0) / 1000.0);
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track1/05-length-and-batch", dir, o.no_plot, "*.png and *.svg");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
        "Lab 05: sweeps that show how each knob moves each phase.\n"
        "  prefill  prefill time against prompt length P; your fit c0 + a*P + b*P^2 separates the\n"
        "           matrix products (linear in P) from attention (quadratic in P)\n"
        "  decode   one decode step against the cache length it reads (the weights cost the same\n"
        "           every step; the cache adds a little per cached token)\n"
        "  output   total time against output length: one decode step per token, so a line\n"
        "  batch    B sequences: prefill tokens/s, and decode steps serving all B at once through\n"
        "           your batched_decode_step() (weights read once per step for all B)\n"
        "  ragged   the engine's decode attention over sequences of different lengths, each row\n"
        "           its own length against every row padded to the longest (host CPU)\n"
        "Each sweep writes a CSV into --out and plot.py draws it (PNG and SVG).\n"
        "Defaults are small (well under a minute with the bundled model on 2 cores). For numbers\n"
        "closer to a real model: --model synthetic:bench-llama-125m --full (minutes).",
        "05-length-and-batch");
    cl.common(o.lab);
    cl.option("--out,-o", o.out, "folder for the CSV files and plots").show_default();
    cl.flag("--full", o.full, "longer sweeps: prompts and caches up to the context length, "
                              "outputs up to 512 tokens, batches up to 32");
    cl.option("--sweeps", o.sweeps, "which sweeps to run, e.g. --sweeps prefill,batch").list().show_default();
    cl.option("--prompt-lens", o.prompt_lens, "prompt lengths for the prefill sweep, e.g. 64,128,256").list();
    cl.option("--cache-lens", o.cache_lens, "cache lengths for the decode sweep").list();
    cl.option("--output-lens", o.output_lens, "output lengths for the output sweep").list();
    cl.option("--batches", o.batches, "batch sizes for the batch sweep").list();
    cl.option("--warmup", o.warmup, "untimed runs before each measurement").show_default();
    cl.option("--repeats,-r", o.repeats, "timed runs per point (the median is reported)").show_default();
    cl.option("--steps", o.steps, "decode steps timed per run (decode and batch sweeps)").show_default();
    cl.option("--output-prompt-len", o.output_prompt_len, "prompt length of the output sweep").show_default();
    cl.option("--batch-prompt-len", o.batch_prompt_len, "prompt length of each sequence in the batch sweep")
        .show_default();
    cl.option("--seed", o.seed, "seed of the random prompt tokens").show_default();
    cl.flag("--no-plot", o.no_plot, "write the CSV files only; print the command that draws them");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
