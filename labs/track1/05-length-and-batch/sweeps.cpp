// Lab 05's five sweeps: each measures its points, prints its table and your
// fit, and writes a CSV for plot.py.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "engine/attention.hpp"  // the engine's decode attention, for the ragged batch
#include "engine/generate.hpp"
#include "engine/sampler.hpp"
#include "exercise.hpp"
#include "print.hpp"
#include "sweeps.hpp"

namespace pd::lab05 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<int> random_tokens(int n, int vocab, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> d(0, vocab - 1);
    std::vector<int> t(n);
    for (int& x : t) x = d(rng);
    return t;
}

// Medians resist a few slow runs; when even p90 sits far above the median,
// something else is using the cores.
void noise_note(const std::vector<Stats>& stats) {
    int noisy = 0;
    for (const Stats& st : stats)
        if (st.p90 > 1.25 * st.median) noisy++;
    if (noisy)
        std::printf("  note: %d of %zu points are noisy (p90 more than 25%% above the median). Other "
                    "programs may share\n  these cores: %smore --repeats, or a quieter machine\n",
                    noisy, stats.size(), omp_get_max_threads() > 1 ? "try --threads 1, " : "try ");
}

std::string fmt_fit(const Fit& f) {
    return fmt::format("c0 = {:.4g} ms, a = {:.4g} ms/token, b = {:.4g} ms/token^2 (r2 = {:.4f})", f.c0, f.a,
                       f.b, f.r2);
}

json fit_json(const Fit& f) { return {{"c0_ms", f.c0}, {"a_ms", f.a}, {"b_ms", f.b}, {"r2", f.r2}}; }

class Csv {
public:
    Csv(const fs::path& p, const std::string& header) : path_(p), out_(p) {
        if (!out_) fail("cannot write {}: check that the folder is writable", p.string());
        out_ << header << "\n";
    }
    template <typename... T>
    void row(const T&... v) {
        std::ostringstream s;
        s.precision(9);
        bool first = true;
        ((s << (first ? "" : ",") << v, first = false), ...);
        out_ << s.str() << "\n";
    }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
    std::ofstream out_;
};

// --- the four sweeps -----------------------------------------------------------

// Where the attention term of the prefill fit stands at the longest prompt.
void explain_prefill_fit(const Fit& f, double Pmax) {
    if (f.a > 0 && f.b > 0) {
        std::printf("  at P = %d the quadratic (attention) term is %.0f%% of a*P + b*P^2; it would equal "
                    "the linear term at P = a/b = %.0f\n",
                    int(Pmax), 100.0 * f.b * Pmax * Pmax / (f.a * Pmax + f.b * Pmax * Pmax), f.a / f.b);
    } else {
        std::printf("  b <= 0 or a <= 0: at these lengths the curve is dominated by something other "
                    "than attention\n  (kernel efficiency rising with P, noise): try --full or a bigger "
                    "model, and compare the us per token column\n");
    }
}


}  // namespace

json sweep_prefill(cli::Session& s, const Options& o, const fs::path& dir, const std::vector<int>& lens) {
    Engine& e = *s.engine;
    const int V = e.config().vocab_size;
    std::mt19937_64 rng(o.seed);
    std::printf("\n[1] prefill time against prompt length (batch 1, %d warm-up + %d runs each)\n", o.warmup,
                o.repeats);
    std::vector<double> P, med;
    std::vector<Stats> stats;
    for (std::size_t i = 0; i < lens.size(); i++) {
        const int L = lens[i];
        std::fprintf(stderr, "prefill: prompt length %d (%zu/%zu)...\n", L, i + 1, lens.size());
        std::vector<int> toks = random_tokens(L, V, rng);
        std::vector<double> ms;
        for (int run = 0; run < o.warmup + o.repeats; run++) {
            e.reset(0);
            double t = e.time_ms([&] { e.prefill(0, toks); });
            if (run >= o.warmup) ms.push_back(t);
        }
        Stats st = summarize(ms);
        P.push_back(L);
        med.push_back(st.median);
        stats.push_back(st);
    }
    Fit f = fit_linear_quadratic(P, med);  // yours
    Csv csv(dir / "prefill_vs_prompt_len.csv",
            "prompt_len,median_ms,mean_ms,stdev_ms,min_ms,p90_ms,ms_per_token,tokens_per_s,fit_ms,fit_linear_ms,"
            "fit_quadratic_ms");
    std::printf("  %8s %11s %9s %13s %13s %11s %12s\n", "P", "median ms", "p90 ms", "us per token",
                "tokens/s", "fit a*P", "fit b*P^2");
    json rows = json::array();
    for (std::size_t i = 0; i < P.size(); i++) {
        const Stats& st = stats[i];
        double per_tok = st.median / P[i];
        csv.row(int(P[i]), st.median, st.mean, st.stdev, st.min, st.p90, per_tok, 1000.0 / per_tok, f.at(P[i]),
                f.a * P[i], f.b * P[i] * P[i]);
        std::printf("  %8d %11.3f %9.3f %13.2f %13.0f %11.3f %12.3f\n", int(P[i]), st.median, st.p90,
                    1000.0 * per_tok, 1000.0 / per_tok, f.a * P[i], f.b * P[i] * P[i]);
        rows.push_back({{"prompt_len", int(P[i])}, {"median_ms", st.median}, {"mean_ms", st.mean},
                        {"stdev_ms", st.stdev}, {"ms_per_token", per_tok}});
    }
    noise_note(stats);
    std::printf("  your fit: time = %s\n", fmt_fit(f).c_str());
    explain_prefill_fit(f, P.back());
    return {{"points", rows}, {"fit", fit_json(f)}, {"csv", csv.path().string()}};
}

namespace {

// Your fit of step time against cache length L, and what a cached token costs.
json explain_decode_fit(const std::vector<double>& L, const std::vector<double>& med) {
    json fit = nullptr;
    if (std::set<double>(L.begin(), L.end()).size() >= 3) {
        Fit f = fit_linear_quadratic(L, med);  // yours
        std::printf("  your fit: step = %s\n", fmt_fit(f).c_str());
        std::printf("  the weights cost the same every step; each cached token adds about %.3f us on "
                    "average (reading its K and V)\n",
                    1000.0 * (f.at(L.back()) - f.at(L.front())) / (L.back() - L.front()));
        fit = fit_json(f);
    }
    std::printf("  longest cache / shortest: %.2fx the step time for %.1fx the cache\n", med.back() / med.front(),
                L.back() / L.front());
    return fit;
}

}  // namespace

json sweep_decode(cli::Session& s, const Options& o, const fs::path& dir, const std::vector<int>& lens) {
    Engine& e = *s.engine;
    const int V = e.config().vocab_size;
    std::mt19937_64 rng(o.seed + 1);
    std::printf("\n[2] one decode step against the cache length it reads (batch 1, %d timed steps at "
                "each length)\n", o.repeats * o.steps);
    std::vector<double> L, med;
    std::vector<Stats> stats;
    std::vector<int> start;
    for (std::size_t i = 0; i < lens.size(); i++) {
        const int S = lens[i];
        std::fprintf(stderr, "decode: cache length %d (%zu/%zu)...\n", S, i + 1, lens.size());
        e.reset(0);
        std::vector<int> toks = random_tokens(S, V, rng);
        // A batch of one sequence in slot 0 with every step still to do.
        const int timed = o.repeats * o.steps;
        Batch one{{0}, {argmax(e.prefill(0, toks), V)}, {o.warmup * o.steps + timed}};
        // Warm-up steps, then timed ones; the cache grows by one each step.
        for (int k = 0; k < o.warmup * o.steps; k++) batched_decode_step(e, one);
        std::vector<double> ms;
        double len_sum = 0;
        for (int k = 0; k < timed; k++) {
            len_sum += e.cache_len(0);
            ms.push_back(e.time_ms([&] { batched_decode_step(e, one); }));  // yours
        }
        Stats st = summarize(ms);
        L.push_back(len_sum / double(ms.size()));
        med.push_back(st.median);
        stats.push_back(st);
        start.push_back(S);
    }
    Csv csv(dir / "decode_vs_cache_len.csv", "cache_len,start_len,median_ms,mean_ms,stdev_ms,p90_ms,tokens_per_s");
    std::printf("  %10s %11s %9s %10s\n", "cache len", "median ms", "p90 ms", "tokens/s");
    json rows = json::array();
    for (std::size_t i = 0; i < L.size(); i++) {
        csv.row(L[i], start[i], med[i], stats[i].mean, stats[i].stdev, stats[i].p90, 1000.0 / med[i]);
        std::printf("  %10.1f %11.3f %9.3f %10.1f\n", L[i], med[i], stats[i].p90, 1000.0 / med[i]);
        rows.push_back({{"cache_len", L[i]}, {"median_ms", med[i]}, {"mean_ms", stats[i].mean},
                        {"stdev_ms", stats[i].stdev}});
    }
    noise_note(stats);
    return {{"points", rows}, {"fit", explain_decode_fit(L, med)}, {"csv", csv.path().string()}};
}

json sweep_output(cli::Session& s, const Options& o, const fs::path& dir, const std::vector<int>& ns) {
    Engine& e = *s.engine;
    const int V = e.config().vocab_size;
    std::mt19937_64 rng(o.seed + 2);
    std::vector<int> prompt = random_tokens(o.output_prompt_len, V, rng);
    std::printf("\n[3] total generation time against output length (prompt %d tokens, greedy, batch 1, "
                "median of %d)\n", o.output_prompt_len, o.repeats);
    GenerateOptions g;
    g.stop_at_eos = false;
    g.max_new_tokens = ns.back();
    for (int w = 0; w < o.warmup; w++) generate(e, prompt, g);
    std::vector<double> N, total;
    Csv csv(dir / "total_vs_output_len.csv",
            "output_len,total_ms,ttft_ms,prefill_ms,decode_ms,ms_per_output_token");
    std::printf("  %6s %11s %9s %11s %13s\n", "n out", "total ms", "TTFT ms", "decode ms", "ms per token");
    json rows = json::array();
    for (std::size_t i = 0; i < ns.size(); i++) {
        const int n = ns[i];
        std::fprintf(stderr, "output: %d tokens (%zu/%zu)...\n", n, i + 1, ns.size());
        g.max_new_tokens = n;
        std::vector<GenerateResult> runs;
        for (int r = 0; r < o.repeats; r++) runs.push_back(generate(e, prompt, g));
        std::sort(runs.begin(), runs.end(), [](auto& a, auto& b) { return a.total_ms < b.total_ms; });
        const GenerateResult& r = runs[runs.size() / 2];
        double dec = 0;
        for (double d : r.decode_ms) dec += d;
        N.push_back(n);
        total.push_back(r.total_ms);
        csv.row(n, r.total_ms, r.ttft_ms, r.prefill_ms, dec, r.total_ms / n);
        std::printf("  %6d %11.3f %9.3f %11.3f %13.3f\n", n, r.total_ms, r.ttft_ms, dec, r.total_ms / n);
        rows.push_back({{"output_len", n}, {"total_ms", r.total_ms}, {"ttft_ms", r.ttft_ms},
                        {"prefill_ms", r.prefill_ms}, {"decode_ms", dec}});
    }
    json fit = nullptr;
    if (std::set<double>(N.begin(), N.end()).size() >= 3) {
        Fit f = fit_linear_quadratic(N, total);
        std::printf("  your fit: total = %s\n", fmt_fit(f).c_str());
        std::printf("  each extra output token costs about a = %.3f ms (one decode step + sampling); "
                    "b*n^2 at n = %d is %.3f ms\n  (the cache each step reads grows by one token per token)\n",
                    f.a, int(N.back()), f.b * N.back() * N.back());
        fit = fit_json(f);
    }
    return {{"points", rows}, {"fit", fit}, {"prompt_len", o.output_prompt_len}, {"csv", csv.path().string()}};
}

namespace {

// From the smallest batch to the largest: what throughput and each request gain or lose.
void explain_batch(const json& a, const json& z) {
    std::printf("  from B = %d to B = %d: decode throughput x%.2f, each request's time per token x%.2f, "
                "prefill throughput x%.2f\n",
                a["batch"].get<int>(), z["batch"].get<int>(),
                z["decode_tokens_per_s"].get<double>() / a["decode_tokens_per_s"].get<double>(),
                z["decode_step_ms"].get<double>() / a["decode_step_ms"].get<double>(),
                z["prefill_tokens_per_s"].get<double>() / a["prefill_tokens_per_s"].get<double>());
    std::printf("  (the decode step time is also each request's time per output token)\n");
}

// B prompts prefilled one after another, then --steps batched decode steps for
// all B, --warmup + --repeats times; the timed prefill and step times (ms).
void measure_batch(cli::Session& s, const Options& o, int B, std::vector<double>& pre, std::vector<double>& step) {
    const int V = s.engine->config().vocab_size;
    const int P = o.batch_prompt_len;
    EngineOptions eo;
    eo.device = s.engine->device();
    eo.batch = B;
    eo.max_seq = P + o.steps;
    auto e = make_engine(s.loaded.model, eo);  // a cache with B slots
    std::mt19937_64 rng(o.seed + 3);
    std::vector<std::vector<int>> prompts;
    for (int b = 0; b < B; b++) prompts.push_back(random_tokens(P, V, rng));
    Batch batch{std::vector<int>(B), std::vector<int>(B), {}};
    for (int b = 0; b < B; b++) batch.slots[b] = b;
    for (int run = 0; run < o.warmup + o.repeats; run++) {
        const bool timed = run >= o.warmup;
        for (int b = 0; b < B; b++) e->reset(b);
        double t = e->time_ms([&] {
            for (int b = 0; b < B; b++) batch.next[b] = argmax(e->prefill(b, prompts[b]), V);
        });
        if (timed) pre.push_back(t);
        batch.remaining.assign(B, o.steps);
        for (int k = 0; k < o.steps; k++) {
            double ms = e->time_ms([&] { batched_decode_step(*e, batch); });  // yours
            if (timed) step.push_back(ms);
        }
    }
}

}  // namespace

json sweep_batch(cli::Session& s, const Options& o, const fs::path& dir, const std::vector<int>& bs) {
    const int P = o.batch_prompt_len;
    std::printf("\n[4] batch size: B prompts of %d tokens (prefilled one after another), then %d decode "
                "steps for all B\n    sequences together through your batched_decode_step() (median of %d)\n",
                P, o.steps, o.repeats);
    Csv csv(dir / "batch.csv",
            "batch,prefill_ms,prefill_tokens_per_s,decode_step_ms,decode_tokens_per_s,per_request_ms_per_token");
    std::printf("  %5s %12s %14s %15s %14s %10s\n", "B", "prefill ms", "prefill tok/s", "decode step ms",
                "decode tok/s", "vs B=1");
    json rows = json::array();
    std::vector<Stats> step_stats;
    double base = 0;
    for (std::size_t i = 0; i < bs.size(); i++) {
        const int B = bs[i];
        std::fprintf(stderr, "batch: B = %d (%zu/%zu)...\n", B, i + 1, bs.size());
        std::vector<double> pre, step;
        measure_batch(s, o, B, pre, step);
        step_stats.push_back(summarize(step));
        double pre_ms = summarize(pre).median, step_ms = step_stats.back().median;
        double pre_tps = 1000.0 * B * P / pre_ms, dec_tps = 1000.0 * B / step_ms;
        if (i == 0) base = dec_tps / B;
        csv.row(B, pre_ms, pre_tps, step_ms, dec_tps, step_ms);
        std::printf("  %5d %12.3f %14.0f %15.3f %14.1f %9.2fx\n", B, pre_ms, pre_tps, step_ms, dec_tps,
                    base > 0 ? dec_tps / base : 0.0);
        rows.push_back({{"batch", B}, {"prefill_ms", pre_ms}, {"prefill_tokens_per_s", pre_tps},
                        {"decode_step_ms", step_ms}, {"decode_tokens_per_s", dec_tps}});
    }
    noise_note(step_stats);
    if (rows.size() >= 2) explain_batch(rows.front(), rows.back());
    return {{"points", rows}, {"prompt_len", P}, {"steps", o.steps}, {"csv", csv.path().string()}};
}

// --- [5] a ragged batch ------------------------------------------------------------

namespace {

// A one-layer cache shaped like the model's attention with random contents,
// and B rows whose lengths spread from 1 to `longest` (one row has it).
struct Ragged {
    KVCache cache;
    std::vector<int> slots, lens;
    std::vector<float> q;  // (B, n_heads * head_dim)
};

Ragged make_ragged(const Config& c, int B, int longest, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> randn(0.0f, 1.0f);
    Ragged r{make_kv_cache(1, B, c.n_kv_heads, longest, c.head_dim), {}, {}, {}};
    for (float& x : r.cache.k) x = randn(rng);
    for (float& x : r.cache.v) x = randn(rng);
    std::uniform_int_distribution<int> len(1, longest);
    for (int b = 0; b < B; b++) r.slots.push_back(b), r.lens.push_back(b == 0 ? longest : len(rng));
    r.q.resize(std::size_t(B) * c.n_heads * c.head_dim);
    for (float& x : r.q) x = randn(rng);
    return r;
}

// Median ms of the engine's decode attention, row r over positions 0 .. lens[r] - 1 (host CPU).
double time_attention(const Ragged& r, const std::vector<int>& lens, int n_heads, int repeats) {
    std::vector<float> out(r.q.size());
    std::vector<int> last(lens.size());
    for (std::size_t b = 0; b < last.size(); b++) last[b] = lens[b] - 1;
    std::vector<double> ms;
    for (int k = 0; k < repeats + 1; k++) {
        const double t = now_ms();
        attention_decode(out.data(), r.q.data(), r.cache, 0, r.slots.data(), last.data(), int(last.size()), n_heads);
        if (k > 0) ms.push_back(now_ms() - t);  // the first call warms the caches
    }
    return summarize(ms).median;
}

}  // namespace

json ragged_batch(const Config& c, const Options& o, int ctx) {
    const int B = 8, longest = std::min(ctx, 1024);
    Ragged r = make_ragged(c, B, longest, o.seed + 4);
    std::printf("\n[5] a ragged batch: decode attention of %d sequences whose caches hold different "
                "lengths,\n    through the engine's attention_decode on the host CPU (one layer, %d heads / %d "
                "KV heads of dim %d)\n", B, c.n_heads, c.n_kv_heads, c.head_dim);
    const std::vector<int> padded(static_cast<std::size_t>(B), longest);
    long ragged_pos = 0;
    for (int len : r.lens) ragged_pos += len;
    const double t_ragged = time_attention(r, r.lens, c.n_heads, o.repeats);
    const double t_padded = time_attention(r, padded, c.n_heads, o.repeats);
    std::printf("  lengths %s\n", lab::id_list(r.lens).c_str());
    std::printf("  %-30s %10s %12s\n", "", "positions", "median ms");
    std::printf("  %-30s %10ld %12.3f\n", "ragged (each row its length)", ragged_pos, t_ragged);
    std::printf("  %-30s %10d %12.3f\n", "padded (every row the longest)", B * longest, t_padded);
    std::printf("  padding to the longest would read %.2fx the positions: the work a ragged batch saves\n",
                double(B) * longest / double(ragged_pos));
    return {{"batch", B}, {"lens", r.lens}, {"ragged_positions", ragged_pos}, {"padded_positions", B * longest},
            {"ragged_ms", t_ragged}, {"padded_ms", t_padded}};
}

}  // namespace pd::lab05
