// bench/paged_bench: what the paged KV cache costs and saves, on one model.
//
//   1. decode ms/token at a cache of --cache positions, batch 1: the
//      contiguous cache (prefill + decode) against the paged serving engine
//      (one forward_batch per step), medians of --steps steps each;
//   2. KV bytes reserved against used for 8 sequences of different lengths:
//      contiguous slots sized to the context, paged blocks;
//   3. time to first token of a prompt of a --cache-token shared prefix and a
//      32-token question, with the prefix computed (miss) and cached (hit).
// Usage: paged_bench [--model M] [--threads N] [--cache N] [--steps N] [--block-size N]
#include <omp.h>

#include <algorithm>
#include <utility>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "common.hpp"
#include "load/model_source.hpp"
#include "base/timing.hpp"
#include "serve/paged_serving_engine.hpp"

using namespace pd;

namespace {

std::vector<int> ids(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; i++) t[i] = (i * 131 + seed * 7919 + 1) % vocab;
    return t;
}

// Batch-1 decode steps at a cache of `cache` positions, the contiguous cache
// and the paged engine taking turns step by step, so that both see the same
// load on a shared machine. Returns the medians {contiguous, paged} in ms.
std::pair<double, double> decode_ms(const std::shared_ptr<const Model>& m, int cache, int steps, int block_size) {
    const auto prompt = ids(cache, m->config.vocab_size, 1);
    KVCache kc = make_kv_cache(*m, 1, cache + steps);
    RunState st = make_run_state(m->config, 1);
    prefill(*m, kc, st, 0, prompt);
    auto e = serve::make_paged_serving_engine(m, {.block_size = block_size, .total_blocks = (cache + steps) / block_size + 1});
    e->open(0, prompt);
    e->reserve(0, cache + steps);
    e->step(std::vector<serve::SeqWork>{{0, prompt}});
    const int slot = 0, token = 3;
    const std::vector<serve::SeqWork> work = {{0, {&token, 1}}};
    std::vector<double> contiguous, paged;
    for (int i = 0; i < steps; i++) {
        double t0 = now_ms();
        decode(*m, kc, st, {&slot, 1}, {&token, 1});
        contiguous.push_back(now_ms() - t0);
        t0 = now_ms();
        e->step(work);
        paged.push_back(now_ms() - t0);
    }
    return {summarize(contiguous).median, summarize(paged).median};
}

void report_decode(const std::shared_ptr<const Model>& m, int cache, int steps, int block_size) {
    const auto [c, p] = decode_ms(m, cache, steps, block_size);
    fmt::print("decode at cache {}: contiguous {:.3f} ms/token, paged {:.3f} ms/token (paged/contiguous {:.3f})\n",
               cache, c, p, p / c);
}

// 8 sequences of 37 .. 500 positions, each prefilled by the paged engine.
void report_memory(const std::shared_ptr<const Model>& m, int block_size) {
    const std::vector<int> lens = {37, 64, 100, 129, 200, 255, 333, 500};
    const int ctx = m->config.max_seq_len;
    int blocks = 0;
    for (int n : lens) blocks += (n + block_size - 1) / block_size;
    auto e = serve::make_paged_serving_engine(m, {.block_size = block_size, .total_blocks = blocks});
    for (int i = 0; i < int(lens.size()); i++) {
        const auto p = ids(lens[i], m->config.vocab_size, 10 + i);
        e->open(i, p);
        e->reserve(i, lens[i]);
        e->step(std::vector<serve::SeqWork>{{i, p, false}});
    }
    const auto use = e->memory_use();
    const std::size_t per_pos = e->bytes_per_block() / block_size;
    // #13's target: paged reserves less than one block per sequence beyond what it uses.
    const double slack_blocks = double(use.reserved_bytes - use.used_bytes) / double(e->bytes_per_block());
    fmt::print("KV bytes, {} sequences: used {:.2f} MB; paged reserved {:.2f} MB (+{:.1f}%, {:.2f} blocks per "
               "sequence: {}); contiguous slots of the context ({}) reserve {:.2f} MB\n", lens.size(),
               use.used_bytes / 1e6, use.reserved_bytes / 1e6,
               100.0 * (double(use.reserved_bytes) / use.used_bytes - 1), slack_blocks / double(lens.size()),
               slack_blocks < double(lens.size()) ? "within one block each" : "MORE than one block each", ctx,
               double(per_pos) * ctx * lens.size() / 1e6);
}

// Open + reserve + the prompt's (remaining) chunk, in ms.
double ttft_ms(serve::PagedServingEngine& e, int seq, const std::vector<int>& prompt, int* covered) {
    const double t0 = now_ms();
    *covered = e.open(seq, prompt);
    e.reserve(seq, int(prompt.size()) + 1);
    const std::span<const int> rest(prompt.data() + *covered, prompt.size() - *covered);
    e.step(std::vector<serve::SeqWork>{{seq, rest}});
    const double ms = now_ms() - t0;
    e.close(seq);
    return ms;
}

void report_prefix(const std::shared_ptr<const Model>& m, int prefix_len, int block_size) {
    const int V = m->config.vocab_size;
    auto e = serve::make_paged_serving_engine(m, {.block_size = block_size, .total_blocks = 4 * (prefix_len / block_size + 4)});
    const auto prefix = ids(prefix_len, V, 5);
    auto ask = [&](int q) { auto p = prefix; for (int t : ids(32, V, 100 + q)) p.push_back(t); return p; };
    int covered = 0;
    std::vector<double> miss, hit;
    for (int r = 0; r < 3; r++) {
        const auto other = ids(prefix_len + 32, V, 50 + r);  // a different prefix: a miss
        miss.push_back(ttft_ms(*e, 2 * r, other, &covered));
        ttft_ms(*e, 2 * r + 1, ask(2 * r), &covered);   // caches the shared prefix ...
        hit.push_back(ttft_ms(*e, 100 + r, ask(2 * r + 1), &covered));  // ... a new question reuses it
    }
    const double mm = summarize(miss).median, hm = summarize(hit).median;
    fmt::print("TTFT of a {}-token shared prefix + 32 tokens: miss {:.2f} ms, hit {:.2f} ms ({} tokens from the "
               "cache), miss/hit {:.1f}x\n", prefix_len, mm, hm, covered, mm / hm);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"paged_bench: the paged KV cache against the contiguous one (decode, memory, prefix hits)"};
    std::string model = "tiny";
    int threads = 2, cache = 512, steps = 32, block_size = 16;
    app.add_option("--model,-m", model, "tiny, synthetic:PRESET or a checkpoint folder");
    app.add_option("--threads,-t", threads, "OpenMP threads")->check(CLI::PositiveNumber);
    app.add_option("--cache", cache, "cached positions before the timed decode steps; the shared prefix length")
        ->check(CLI::PositiveNumber);
    app.add_option("--steps", steps, "timed decode steps")->check(CLI::PositiveNumber);
    app.add_option("--block-size", block_size, "positions per block")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    try {
        omp_set_num_threads(threads);
        auto lm = load_model(model, Precision::f32, false);
        if (cache + std::max(steps, 33) > lm.model->config.max_seq_len)
            fail("--cache {} + --steps {} do not fit the context of {}: ask for less", cache, steps,
                 lm.model->config.max_seq_len);
        fmt::print("model {}, {} threads, blocks of {}\n", model, threads, block_size);
        report_decode(lm.model, cache, steps, block_size);
        report_memory(lm.model, block_size);
        report_prefix(lm.model, cache, block_size);
    } catch (const UserError& e) {
        fmt::print(stderr, "paged_bench: {}\n", e.what());
        return 2;
    }
}
