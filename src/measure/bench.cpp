#include "measure/bench.hpp"

#include <dlfcn.h>

#include <fstream>
#include <functional>
#include <random>
#include <string>

namespace pd {

void validate(const BenchOptions& o, const Engine& e) {
    if (o.prompt_len < 1) fail("--prompt-len must be at least 1, got {}", o.prompt_len);
    if (o.gen < 0) fail("--gen must be >= 0, got {}", o.gen);
    if (o.batch < 1) fail("--batch must be at least 1, got {}", o.batch);
    if (o.warmup < 0) fail("--warmup must be >= 0, got {}", o.warmup);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    if (o.peak_gflops < 0) fail("--peak-gflops must be positive, got {}", o.peak_gflops);
    if (std::int64_t(o.prompt_len) + o.gen > e.max_seq())  // 64-bit: two ints can overflow
        fail("--prompt-len {} plus --gen {} exceed the context length of {} (the model's, or "
             "--max-seq)", o.prompt_len, o.gen, e.max_seq());
}

int process_threads() {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "Threads:") {
            int n = 0;
            in >> n;
            return n;
        }
        in.ignore(1 << 12, '\n');
    }
    return 0;
}

namespace {

// Counters exported by bench/malloc_count.so when it is preloaded
// (LD_PRELOAD); absent otherwise.
using Counter = long (*)();
Counter find_counter(const char* name) {
    return reinterpret_cast<Counter>(::dlsym(RTLD_DEFAULT, name));
}

// B prompts of P token ids drawn from the seed: (B, P).
std::vector<std::vector<int>> bench_prompts(const BenchOptions& o, int vocab) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    std::vector<std::vector<int>> prompts(o.batch, std::vector<int>(o.prompt_len));
    for (auto& p : prompts)
        for (int& t : p) t = dist(rng);
    return prompts;
}

// The matrix peak (given, or probed: it allocates and JIT-compiles, so it
// runs before, and away from, the bandwidth probe and the timed runs).
void set_peak(BenchResult& r, const BenchOptions& o, Precision precision, bool cpu) {
    if (o.peak_gflops > 0) {
        r.peak_gflops = o.peak_gflops;
        r.peak_source = "--peak-gflops";
    } else if (cpu && o.bandwidth_probe_s > 0) {
        // int8's prefill multiplies its weights dequantized to bf16 (matmul.hpp).
        PeakResult pk = measure_peak_gflops(is_int8(precision) ? Precision::bf16 : precision, 2048, 3, 0.3);
        r.peak_gflops = pk.best_gflops;
        r.peak_source = fmt::format("oneDNN probe, {} n={} ({})", precision_name(precision), pk.n, pk.impl);
    }
}

// Warm-up and measured runs: each resets the B sequences, prefills them
// (timed together), then times `gen` decode steps. Counts heap allocations
// and threads created during the measured decode loops when
// bench/malloc_count.so is preloaded.
void time_runs(Engine& engine, const BenchOptions& o, const std::vector<std::vector<int>>& prompts,
               BenchResult& r) {
    std::vector<int> slots(o.batch), tokens(o.batch);
    for (int b = 0; b < o.batch; b++) slots[b] = b;
    // Everything the timed loop touches is sized before it starts: the sample
    // vectors, and the step closure (std::ref: std::function stores the
    // reference in place, no heap).
    r.prefill_ms.reserve(o.repeats);
    r.decode_step_ms.reserve(std::size_t(o.repeats) * o.gen);
    auto step = [&] { engine.decode(slots, tokens); };
    auto prefill_all = [&] {
        for (int b = 0; b < o.batch; b++) engine.prefill(b, prompts[b]);
    };
    const Counter allocs = find_counter("pdlab_alloc_count");
    const Counter threads_made = find_counter("pdlab_thread_count");
    long alloc_total = 0, threads_total = 0;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const bool measured = run >= o.warmup;
        for (int b = 0; b < o.batch; b++) engine.reset(b);
        double pre = engine.time_ms(std::ref(prefill_all));
        if (measured) r.prefill_ms.push_back(pre);
        // Decode feeds fixed tokens: the work per step does not depend on which.
        for (int b = 0; b < o.batch; b++) tokens[b] = prompts[b][0];
        const long a0 = allocs ? allocs() : 0, t0 = threads_made ? threads_made() : 0;
        for (int s = 0; s < o.gen; s++) {
            double ms = engine.time_ms(std::ref(step));
            if (measured) r.decode_step_ms.push_back(ms);
        }
        if (measured) {
            alloc_total += allocs ? allocs() - a0 : 0;
            threads_total += threads_made ? threads_made() - t0 : 0;
        }
        r.final_cache_len = engine.cache_len(0);
    }
    if (allocs) r.decode_allocations = alloc_total;
    if (threads_made) r.decode_threads_created = threads_total;
}

// Statistics, rates, and the floors of both phases under this run's ceilings.
void summarize_run(BenchResult& r, const BenchOptions& o, const Config& c, Precision precision) {
    r.prefill = summarize(r.prefill_ms);
    r.decode_step = summarize(r.decode_step_ms);
    r.prefill_tokens_per_s = r.prefill.median > 0 ? 1000.0 * o.batch * o.prompt_len / r.prefill.median : 0;
    r.decode_tokens_per_s = r.decode_step.median > 0 ? 1000.0 * o.batch / r.decode_step.median : 0;
    if (r.bandwidth_before.passes > 0 && r.bandwidth_after.passes > 0)
        r.bandwidth_gbps = (r.bandwidth_before.best_gbps + r.bandwidth_after.best_gbps) / 2;
    Ceilings roof{r.peak_gflops, r.bandwidth_gbps};
    r.decode_context = o.prompt_len + (o.gen + 1) / 2.0;
    r.prefill_floor = prefill_cost(c, precision, o.prompt_len, o.batch, roof);
    r.decode_floor = decode_cost(c, precision, o.batch, r.decode_context, roof);
}

}  // namespace

BenchResult run_bench(Engine& engine, const BenchOptions& o) {
    validate(o, engine);
    const Precision precision = engine.host_model().precision;
    const bool cpu = engine.device() == Device::cpu;
    const bool probe_bandwidth = cpu && o.bandwidth_probe_s > 0;
    const auto prompts = bench_prompts(o, engine.config().vocab_size);

    BenchResult r;
    set_peak(r, o, precision, cpu);
    r.threads_before = process_threads();
    if (probe_bandwidth) r.bandwidth_before = quick_bandwidth(o.bandwidth_probe_s);
    time_runs(engine, o, prompts, r);
    if (probe_bandwidth) r.bandwidth_after = quick_bandwidth(o.bandwidth_probe_s);
    r.threads_after = process_threads();
    summarize_run(r, o, engine.config(), precision);
    return r;
}

}  // namespace pd
