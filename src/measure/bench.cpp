#include "measure/bench.hpp"

#include <dlfcn.h>

#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "base/timeline.hpp"
#include "engine/sampler.hpp"

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

std::vector<std::vector<int>> bench_prompts(const BenchOptions& o, int vocab) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    std::vector<std::vector<int>> prompts(o.batch, std::vector<int>(o.prompt_len));
    for (auto& p : prompts)
        for (int& t : p) t = dist(rng);
    return prompts;
}

namespace {

// Counters exported by bench/malloc_count.so when it is preloaded
// (LD_PRELOAD); absent otherwise.
using Counter = long (*)();
Counter find_counter(const char* name) {
    return reinterpret_cast<Counter>(::dlsym(RTLD_DEFAULT, name));
}

// The matrix peak (given, or probed: it allocates and JIT-compiles, so it
// runs before, and away from, the bandwidth probe and the timed runs).
void set_peak(BenchResult& r, const BenchOptions& o, Precision precision, bool cpu) {
    if (o.peak_gflops > 0) {
        r.peak_gflops = o.peak_gflops;
        r.peak_source = "--peak-gflops";
    } else if (cpu && o.bandwidth_probe_s > 0) {
        // int8's and int4's prefill multiplies their weights dequantized to bf16 (matmul.hpp).
        PeakResult pk = measure_peak_gflops(is_quantized(precision) ? Precision::bf16 : precision, 2048, 3, 0.3);
        r.peak_gflops = pk.best_gflops;
        r.peak_source = fmt::format("oneDNN probe, {} n={} ({})", precision_name(precision), pk.n, pk.impl);
    }
}

// One engine's part in the runs: its result, and the token each of its B
// sequences decodes next (greedy: the argmax of that sequence's last logits).
struct Lane {
    Engine* engine;
    BenchResult* r;
    std::vector<int> next;  // (B)
};

// Resets the B sequences and prefills them one after another, each timed;
// each prompt's argmax (taken after its clock stops) is its first token.
// Returns the prefill time of all B, in ms.
double prefill_lane(Lane& l, const std::vector<std::vector<int>>& prompts) {
    Engine& e = *l.engine;
    const int V = e.config().vocab_size;
    double ms = 0;
    for (int b = 0; b < int(prompts.size()); b++) {
        e.reset(b);
        const float* logits = nullptr;
        ms += e.time_ms([&] { logits = e.prefill(b, prompts[b]); });
        l.next[b] = argmax(logits, V);
        l.r->greedy_ids[b].assign(1, l.next[b]);  // a new run: its first token
    }
    return ms;
}

// One decode step of the B sequences, timed; each row's argmax (taken after
// the clock stops) is that sequence's next token. The step closure is passed
// by std::ref: std::function then stores the reference in place, no heap.
double decode_lane(Lane& l, std::span<const int> slots) {
    Engine& e = *l.engine;
    const float* logits = nullptr;  // (B, vocab)
    auto step = [&] { logits = e.decode(slots, l.next); };
    const double ms = e.time_ms(std::ref(step));
    const int V = e.config().vocab_size;
    for (std::size_t b = 0; b < l.next.size(); b++) {
        l.next[b] = argmax(logits + b * V, V);
        l.r->greedy_ids[b].push_back(l.next[b]);  // capacity reserved: no heap
    }
    return ms;
}

// Heap allocations and thread creations counted around one decode step,
// added to the lane's totals (only when bench/malloc_count.so is preloaded).
struct LoopCounters {
    Counter allocs = find_counter("pdlab_alloc_count");
    Counter threads_made = find_counter("pdlab_thread_count");

    void start(BenchResult& r) const {
        if (allocs) r.decode_allocations = 0;
        if (threads_made) r.decode_threads_created = 0;
    }
    double counted_step(Lane& l, std::span<const int> slots, bool measured) const {
        const long a0 = allocs ? allocs() : 0, t0 = threads_made ? threads_made() : 0;
        const double ms = decode_lane(l, slots);
        if (measured && allocs) l.r->decode_allocations += allocs() - a0;
        if (measured && threads_made) l.r->decode_threads_created += threads_made() - t0;
        return ms;
    }
};

// Everything the timed loop touches is sized before it starts: the sample
// vectors and the greedy tokens.
void reserve_samples(BenchResult& r, const BenchOptions& o) {
    r.prefill_ms.reserve(o.repeats);
    r.decode_step_ms.reserve(std::size_t(o.repeats) * o.gen);
    r.greedy_ids.assign(o.batch, {});
    for (auto& ids : r.greedy_ids) ids.reserve(std::size_t(o.gen) + 1);
}

// Warm-up and measured runs: each prefills every lane's B sequences afresh,
// then takes `gen` rounds, a round being one timed decode step of each lane
// in turn. Only the measured runs' samples are kept.
void time_runs(std::vector<Lane>& lanes, const BenchOptions& o, const std::vector<std::vector<int>>& prompts) {
    std::vector<int> slots(o.batch);
    for (int b = 0; b < o.batch; b++) slots[b] = b;
    const LoopCounters counters;
    for (Lane& l : lanes) {
        reserve_samples(*l.r, o);
        counters.start(*l.r);
    }
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const bool measured = run >= o.warmup;
        TimelineScope span(measured ? "measured run" : "warm-up run", "run");  // around its phases
        span.arg("run", run + 1);
        for (Lane& l : lanes) {
            const double ms = prefill_lane(l, prompts);
            if (measured) l.r->prefill_ms.push_back(ms);
        }
        for (int s = 0; s < o.gen; s++)
            for (Lane& l : lanes) {
                const double ms = counters.counted_step(l, slots, measured);
                if (measured) l.r->decode_step_ms.push_back(ms);
            }
        for (Lane& l : lanes) l.r->final_cache_len = l.engine->cache_len(0);
    }
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
    Engine* one[] = {&engine};
    return run_bench_turns(one, o)[0];
}

std::vector<BenchResult> run_bench_turns(std::span<Engine* const> engines, const BenchOptions& o) {
    for (Engine* e : engines) validate(o, *e);
    const Engine& first = *engines.front();
    const bool cpu = first.device() == Device::cpu;
    const bool probe_bandwidth = cpu && o.bandwidth_probe_s > 0;
    const auto prompts = bench_prompts(o, first.config().vocab_size);

    std::vector<BenchResult> results(engines.size());
    std::vector<Lane> lanes;
    for (std::size_t i = 0; i < engines.size(); i++) {
        set_peak(results[i], o, engines[i]->host_model().precision, cpu);
        lanes.push_back({engines[i], &results[i], std::vector<int>(o.batch)});
    }
    const int threads_before = process_threads();
    const BandwidthResult before = probe_bandwidth ? quick_bandwidth(o.bandwidth_probe_s) : BandwidthResult{};
    time_runs(lanes, o, prompts);
    const BandwidthResult after = probe_bandwidth ? quick_bandwidth(o.bandwidth_probe_s) : BandwidthResult{};
    const int threads_after = process_threads();
    for (std::size_t i = 0; i < engines.size(); i++) {
        BenchResult& r = results[i];
        r.threads_before = threads_before, r.threads_after = threads_after;
        r.bandwidth_before = before, r.bandwidth_after = after;
        summarize_run(r, o, engines[i]->config(), engines[i]->host_model().precision);
    }
    return results;
}

}  // namespace pd
