#include "bench.hpp"

#include <random>

namespace pd {

void validate(const BenchOptions& o, const Engine& e) {
    if (o.prompt_len < 1) fail("--prompt-len must be at least 1, got {}", o.prompt_len);
    if (o.gen < 0) fail("--gen must be >= 0, got {}", o.gen);
    if (o.batch < 1) fail("--batch must be at least 1, got {}", o.batch);
    if (o.warmup < 0) fail("--warmup must be >= 0, got {}", o.warmup);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    if (o.prompt_len + o.gen > e.max_seq())
        fail("--prompt-len {} plus --gen {} exceed the context length of {}", o.prompt_len, o.gen,
             e.max_seq());
}

BenchResult run_bench(Engine& engine, const BenchOptions& o) {
    validate(o, engine);
    const int V = engine.config().vocab_size;
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> dist(0, V - 1);
    std::vector<std::vector<int>> prompts(o.batch, std::vector<int>(o.prompt_len));
    for (auto& p : prompts)
        for (int& t : p) t = dist(rng);
    std::vector<int> slots(o.batch), tokens(o.batch);
    for (int b = 0; b < o.batch; b++) slots[b] = b;

    BenchResult r;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const bool measured = run >= o.warmup;
        for (int b = 0; b < o.batch; b++) engine.reset(b);
        double pre = engine.time_ms([&] {
            for (int b = 0; b < o.batch; b++) engine.prefill(b, prompts[b]);
        });
        if (measured) r.prefill_ms.push_back(pre);
        // Decode feeds fixed tokens: the work per step does not depend on which.
        for (int b = 0; b < o.batch; b++) tokens[b] = prompts[b][0];
        for (int step = 0; step < o.gen; step++) {
            double ms = engine.time_ms([&] { engine.decode(slots, tokens); });
            if (measured) r.decode_step_ms.push_back(ms);
        }
        r.final_cache_len = engine.cache_len(0);
    }
    r.prefill = summarize(r.prefill_ms);
    r.decode_step = summarize(r.decode_step_ms);
    r.prefill_tokens_per_s = r.prefill.median > 0 ? 1000.0 * o.batch * o.prompt_len / r.prefill.median : 0;
    r.decode_tokens_per_s = r.decode_step.median > 0 ? 1000.0 * o.batch / r.decode_step.median : 0;
    return r;
}

}  // namespace pd
