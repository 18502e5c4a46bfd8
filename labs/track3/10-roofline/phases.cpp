// Lab 10, [3]: the model's own prefill and decode passes timed, each run
// placed at your counted intensity and its measured GFLOP/s, under your roof.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "engine/model.hpp"
#include "lab10.hpp"

namespace pd::lab10 {

using nlohmann::json;

namespace {

// One measured point: your counted intensity, the measured rate, your roof.
json place(const char* phase, int batch, const std::vector<Count>& rows, double ms, const Ceilings& roof) {
    const double f = total(rows, &Count::flops), b = total(rows, &Count::bytes), I = f / b;
    const double attained = f / (ms * 1e6), ceiling = attainable_gflops(I, roof.peak_gflops, roof.bandwidth_gbps);
    // Above the roof: bytes that came from the caches, not DRAM, or a peak probed at a busier moment.
    const char* where = attained > 1.05 * ceiling ? "ABOVE the roof: README \"Above the roof\""
                        : I < roof.ridge()       ? "memory-bound"
                                                 : "compute-bound";
    std::printf("  %-8s %5d %10.3f %10.2f %11.1f %11.1f %8.0f%%   %s\n", phase, batch, ms, I, attained, ceiling,
                100.0 * attained / ceiling, where);
    return {{"phase", phase}, {"batch", batch}, {"ms", ms}, {"flops", f}, {"bytes", b}, {"intensity", I},
            {"attained_gflops", attained}, {"roof_gflops", ceiling}};
}

// Timed runs of the model's own forward passes (model.hpp), on one cache of
// `batch` slots: one prompt prefilled, then copied into every slot, so a
// batch of B costs one prefill, not B.
struct Timings {
    double prefill_ms = 0;      // median, one prompt of P tokens
    double decode_ms = 0;       // median step for all B sequences
    double decode_context = 0;  // mean positions a step attends to, per sequence
};

void copy_slot0_everywhere(KVCache& c) {
    const std::size_t per_slot = std::size_t(c.n_kv_heads) * c.max_seq * c.head_dim;
    for (int l = 0; l < c.n_layers; l++)
        for (int b = 1; b < c.batch; b++) {
            std::memcpy(kv_key(c, l, b, 0, 0), kv_key(c, l, 0, 0, 0), per_slot * sizeof(float));
            std::memcpy(kv_value(c, l, b, 0, 0), kv_value(c, l, 0, 0, 0), per_slot * sizeof(float));
        }
}

Timings time_phases(const Model& m, const Options& o, int B) {
    const int P = o.prompt_len;
    KVCache cache = make_kv_cache(m, B, P + o.gen);
    RunState st = make_run_state(m.config, std::max(P, B));
    std::vector<int> prompt(P), slots(B), next(B, 1);
    for (int i = 0; i < P; i++) prompt[i] = (7 * i + 3) % m.config.vocab_size;
    for (int b = 0; b < B; b++) slots[b] = b;
    std::vector<double> pre, step;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        std::fill(cache.seq_len.begin(), cache.seq_len.end(), 0);
        double t0 = now_ms();
        prefill(m, cache, st, 0, prompt);
        if (run >= o.warmup) pre.push_back(now_ms() - t0);
        copy_slot0_everywhere(cache);
        std::fill(cache.seq_len.begin(), cache.seq_len.end(), P);
        for (int k = 0; k < o.gen; k++) {
            t0 = now_ms();
            decode(m, cache, st, slots, next);
            if (run >= o.warmup) step.push_back(now_ms() - t0);
        }
    }
    // Step k attends to P + k + 1 positions (the new one included): the mean over the run.
    return {percentile(pre, 50), percentile(step, 50), P + (o.gen + 1) / 2.0};
}

}  // namespace

json measure_model(cli::Session& s, const Options& o, const std::string& model, const Ceilings& roof) {
    const Config& c = s.loaded.model->config;
    const Precision p = cli::precision_of(o.lab);
    std::printf("\n[3] %s, timed (median of %d runs; decode: %d steps after a %d-token prompt)\n", model.c_str(),
                o.repeats, o.gen, o.prompt_len);
    std::printf("  %-8s %5s %10s %10s %11s %11s %9s\n", "phase", "batch", "ms", "FLOP/byte", "GFLOP/s", "roof",
                "of roof");
    json points = json::array();
    for (int B : o.batches) {
        std::fprintf(stderr, "%s: batch %d...\n", model.c_str(), B);
        const Timings t = time_phases(*s.loaded.model, o, B);
        if (B == o.batches.front())  // the engine prefills one prompt at a time: batch 1
            points.push_back(place("prefill", 1, count_phase(c, {Phase::prefill, p, 1, o.prompt_len, 0}),
                                   t.prefill_ms, roof));
        points.push_back(place("decode", B, count_phase(c, {Phase::decode, p, B, 0, t.decode_context}),
                               t.decode_ms, roof));
    }
    return points;
}

}  // namespace pd::lab10
