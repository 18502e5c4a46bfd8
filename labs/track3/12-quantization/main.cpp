// Lab 12: quantization. Decode streams every weight once per token, so fewer
// bytes per weight is fewer milliseconds per token. The program:
//   1. runs your quantize_row / dequantize_row / dot_int8 (exercise.cpp) on a
//      real weight matrix of the model, for group sizes 32, 64 and 128, and
//      checks them against the engine's own quantizer and kernel;
//   2. loads the model in f32, bf16, int8 and int4 (the stretch; --group-size)
//      and shows, side by side in one run: weight bytes, decode ms/token
//      against the bandwidth floor, prefill time, held-out perplexity and
//      greedy agreement with f32.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "exercise.hpp"
#include "lab_main.hpp"
#include "engine/quantize.hpp"
#include "load/model_source.hpp"
#include "measure/bench.hpp"
#include "measure/quality.hpp"

using namespace pd;
namespace ex = pd::lab12;

namespace {

struct Options {
    cli::CommonOptions lab;
    BenchOptions bench{.prompt_len = 128, .gen = 32, .batch = 1, .warmup = 1, .repeats = 3};
    int agree_steps = 32;  // greedy steps compared with f32 per prompt
};

// The prompts greedy agreement is measured on: fixed, in the tiny model's world.
const char* kPrompts[] = {"Once upon a time", "One day, a little fox", "Lily and Tom went to the park",
                          "The storm was loud, so", "\"Can you help me?\" asked the"};

// --- 1. your quantizer on a real matrix -------------------------------------------

struct GroupReport {
    int group = 0;
    double mean_rel_err = 0, max_abs_err = 0;  // of dequantize(quantize(w)) against w
    double bytes_per_weight = 0;
    bool same_as_engine = true, dot_ok = true;
};

// Every row of layer 0's first MLP matrix (rows kept: loaded for both backends).
GroupReport quantize_matrix(const Matrix& m, int G) {
    GroupReport r{G};
    const QuantizedMatrix ref = quantize_rows(m.w.data(), m.out, m.in, G);
    double err = 0, mag = 0;
    std::vector<float> x(std::size_t(m.in), 1.0f / std::sqrt(float(m.in)));
    for (int n = 0; n < m.out; n++) {
        std::span<const float> w(m.w.data() + std::size_t(n) * m.in, std::size_t(m.in));
        const ex::QuantizedRow q = ex::quantize_row(w, G);
        const std::vector<float> dq = ex::dequantize_row(q);
        r.same_as_engine = r.same_as_engine && std::equal(q.q.begin(), q.q.end(), ref.q.begin() + std::size_t(n) * m.in);
        double dot_ref = 0;
        for (int k = 0; k < m.in; k++) {
            const double e = std::fabs(double(w[k]) - dq[k]);
            err += e, mag += std::fabs(w[k]), r.max_abs_err = std::max(r.max_abs_err, e);
            dot_ref += double(dq[k]) * x[k];
        }
        r.dot_ok = r.dot_ok && std::fabs(ex::dot_int8(q, x) - dot_ref) <= 1e-6 * (1 + std::fabs(dot_ref));
    }
    r.mean_rel_err = mag > 0 ? err / mag : 0;
    r.bytes_per_weight = double(matrix_bytes(m.in, m.out, int8_precision(G))) / (double(m.in) * m.out);
    return r;
}

// The engine's int4 (the stretch) on the same matrix: mean |w - q s| / |w|, q in [-7, 7].
double int4_mean_rel_err(const Matrix& m, int G) {
    const std::vector<float> dq = dequantize_rows(quantize_rows(m.w.data(), m.out, m.in, G, kInt4Max));
    double err = 0, mag = 0;
    for (std::size_t i = 0; i < dq.size(); i++) err += std::fabs(double(m.w[i]) - dq[i]), mag += std::fabs(m.w[i]);
    return mag > 0 ? err / mag : 0;
}

nlohmann::json section_your_quantizer(const Options& o, bool& ok) {
    LoadedModel lm = load_model(o.lab.model, Precision::f32, false, {.cpu = true, .cuda = true});
    const Matrix& m = lm.model->w.layers[0].mlp_in;
    std::printf("1. Your quantizer on layer 0's MLP input matrix (%d x %d)\n", m.out, m.in);
    std::printf("   %5s %12s %14s %16s %10s %8s   %s\n", "G", "bytes/weight", "mean |err|/|w|", "max |err|", "= engine",
                "dot ok", "int4 (engine): bytes/weight, mean |err|/|w|");
    nlohmann::json rows = nlohmann::json::array();
    for (int G : {32, 64, 128}) {
        const GroupReport r = quantize_matrix(m, G);
        const double int4_bytes = double(matrix_bytes(m.in, m.out, int4_precision(G))) / (double(m.in) * m.out);
        const double int4_err = int4_mean_rel_err(m, G);
        std::printf("   %5d %12.4f %13.3f%% %16.3g %10s %8s   %6.4f %8.2f%%\n", G, r.bytes_per_weight,
                    100 * r.mean_rel_err, r.max_abs_err, r.same_as_engine ? "yes" : "NO", r.dot_ok ? "yes" : "NO",
                    int4_bytes, 100 * int4_err);
        ok = ok && r.same_as_engine && r.dot_ok;
        rows.push_back({{"group", G}, {"bytes_per_weight", r.bytes_per_weight}, {"mean_rel_err", r.mean_rel_err},
                        {"same_as_engine", r.same_as_engine}, {"dot_ok", r.dot_ok},
                        {"int4_bytes_per_weight", int4_bytes}, {"int4_mean_rel_err", int4_err}});
    }
    std::printf("   f32 is 4 bytes per weight, bf16 2. Smaller groups follow the weights more closely and pay\n"
                "   more for scales.\n\n");
    return rows;
}

// --- 2. f32, bf16, int8 and int4 side by side --------------------------------------------

struct PrecisionRow {
    std::string name;
    double weight_mb = 0, decode_ms = 0, floor_ms = 0, prefill_ms = 0, perplexity = 0, agreement = 1;
};

std::vector<std::vector<int>> encode_all(const Tokenizer& tok, const std::vector<std::string>& texts) {
    std::vector<std::vector<int>> ids;
    for (const auto& t : texts) ids.push_back(tok.encode(t));
    return ids;
}

// Loads the model in `precision` and measures one row; f32's engine is the
// reference for greedy agreement (null for f32 itself).
// The engine is handed back in `keep` (it holds its model): f32's serves the later rows.
PrecisionRow measure(const Options& o, const std::string& precision, Engine* f32, std::unique_ptr<Engine>& keep) {
    cli::CommonOptions c = o.lab;
    c.precision = precision;
    cli::Session s = cli::load_session(c);
    const auto heldout = heldout_text(o.lab.model);
    const auto texts = heldout.empty() ? std::vector<std::vector<int>>{}
                                       : encode_all(s.loaded.tokenizer, read_paragraphs(heldout));
    std::size_t need = std::size_t(o.bench.prompt_len + o.bench.gen);
    for (const auto& t : texts) need = std::max(need, t.size());
    cli::start_engine(s, c, 1, std::int64_t(need + o.agree_steps + 16));
    Engine& e = *s.engine;
    PrecisionRow r{precision_name(e.host_model().precision)};
    r.weight_mb = double(matmul_weight_bytes(e.host_model().w)) / 1e6;
    const BenchResult b = run_bench(e, o.bench);
    r.decode_ms = b.decode_step.median, r.floor_ms = b.decode_floor.floor_ms, r.prefill_ms = b.prefill.median;
    if (!texts.empty()) r.perplexity = perplexity(e, texts).perplexity;
    if (f32) r.agreement = greedy_agreement(*f32, e, encode_all(s.loaded.tokenizer, {std::begin(kPrompts), std::end(kPrompts)}), o.agree_steps).rate();
    keep = std::move(s.engine);
    return r;
}

nlohmann::json section_side_by_side(const Options& o) {
    std::printf("2. %s, f32 / bf16 / int8 / int4 (group %d), %d thread(s): decode B=1 after a %d-token prompt\n",
                o.lab.model.c_str(), o.lab.group_size, omp_get_max_threads(), o.bench.prompt_len);
    std::printf("   %-10s %10s %12s %10s %9s %12s %11s %11s\n", "precision", "weights MB", "decode ms/tok", "floor ms",
                "x floor", "prefill ms", "perplexity", "agree f32");
    std::unique_ptr<Engine> f32, other;
    nlohmann::json rows = nlohmann::json::array();
    std::vector<PrecisionRow> all;
    // int4 has no GPU kernel (check_device refuses it): on cuda its row is left out.
    const bool with_int4 = parse_device(o.lab.device) == Device::cpu;
    std::vector<const char*> precisions = {"f32", "bf16", "int8"};
    if (with_int4) precisions.push_back("int4");
    for (const char* p : precisions) {
        all.push_back(std::string(p) == "f32" ? measure(o, p, nullptr, f32) : measure(o, p, f32.get(), other));
        const PrecisionRow& r = all.back();
        // No floor where no bandwidth was measured (run_bench probes the CPU's DRAM only): "-", null.
        const bool floor = r.floor_ms > 0;
        std::printf("   %-10s %10.1f %12.3f %10s %9s %12.1f %11.4f %10.1f%%\n", r.name.c_str(), r.weight_mb,
                    r.decode_ms, floor ? fmt::format("{:.3f}", r.floor_ms).c_str() : "-",
                    floor ? fmt::format("{:.2f}", r.decode_ms / r.floor_ms).c_str() : "-", r.prefill_ms, r.perplexity,
                    100 * r.agreement);
        rows.push_back({{"precision", r.name}, {"weight_mb", r.weight_mb}, {"decode_ms", r.decode_ms},
                        {"decode_floor_ms", floor ? nlohmann::json(r.floor_ms) : nlohmann::json(nullptr)},
                        {"prefill_ms", r.prefill_ms}, {"perplexity", r.perplexity}, {"greedy_agreement", r.agreement}});
    }
    std::printf("   decode speed-up of int8: %.2fx over bf16, %.2fx over f32", all[1].decode_ms / all[2].decode_ms,
                all[0].decode_ms / all[2].decode_ms);
    if (with_int4) std::printf("; of int4: %.2fx over int8", all[2].decode_ms / all[3].decode_ms);
    else std::printf(" (int4 runs on the CPU only: drop --device cuda for its row)");
    std::printf("\n   (uptime tells the load: compare ratios measured in one run; `pdlab bench --precision\n"
                "   bf16,int8,int4` takes them in turns). Perplexity 0 means the model ships no held-out text.\n");
    if (all[0].floor_ms <= 0)
        std::printf("   floor \"-\": no bandwidth was measured (the probe reads the CPU's DRAM); a GPU's is\n"
                    "   gpu/dev/bandwidth's (docs/gpu.md): weights MB / (its GB/s) is the floor in ms.\n");
    std::printf("\n");
    return rows;
}

void try_exercises() {
    const std::vector<float> w = {1.0f, -2.0f};
    ex::dot_int8(ex::quantize_row(w, 1), w);
    ex::dequantize_row(ex::quantize_row(w, 1));
}

int run(const Options& o) {
    if (o.bench.prompt_len < 1 || o.bench.gen < 1 || o.bench.repeats < 1 || o.agree_steps < 1)
        fail("--prompt-len, --gen, --repeats and --agree-steps must be at least 1");
    cli::apply_runtime(o.lab);
    try_exercises();
    bool ok = true;
    nlohmann::json j{{"lab", "12-quantization"}, {"model", o.lab.model}, {"group_size", o.lab.group_size}};
    j["your_quantizer"] = section_your_quantizer(o, ok);
    j["precisions"] = section_side_by_side(o);
    lab::write_lab_json(o.lab, j);
    return lab::finish(ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl(
        "Lab 12: quantization. Your group quantizer (exercise.cpp) on a real weight matrix, checked\n"
        "against the engine's; then the model in f32, bf16, int8 and int4 side by side: bytes of\n"
        "weights, decode ms/token against the bandwidth floor, prefill time, held-out perplexity and\n"
        "how often each picks f32's greedy token.\n\n"
        "Example: 12-quantization --threads 2\n"
        "         12-quantization --model synthetic:bench-llama-125m --group-size 128",
        "12-quantization");
    cl.common(o.lab);
    cl.option("--prompt-len,-P", o.bench.prompt_len, "prompt tokens before the timed decode").show_default();
    cl.option("--gen,-n", o.bench.gen, "timed decode steps per run").show_default();
    cl.option("--repeats,-r", o.bench.repeats, "timed runs per precision").show_default();
    cl.option("--agree-steps", o.agree_steps, "greedy steps per prompt compared with f32").show_default();
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
