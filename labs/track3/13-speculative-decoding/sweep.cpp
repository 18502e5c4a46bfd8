// Lab 13's measurements: each k plain against speculative over every prompt,
// the table, what the costs explain, and the CSV.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "engine/generate.hpp"
#include "lab13.hpp"

namespace pd::lab13 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

AcceptRule your_rule(bool greedy) {
    if (greedy) return [](const Proposal& p, Rng&) { return accept_greedy(p); };
    return [](const Proposal& p, Rng& rng) { return accept_sampled(p, rng); };
}

void add(SpeculativeStats& sum, const SpeculativeStats& s) {
    sum.rounds += s.rounds, sum.proposed += s.proposed, sum.accepted += s.accepted, sum.rejections += s.rejections;
    sum.target_passes += s.target_passes, sum.draft_passes += s.draft_passes;
    sum.draft_ms += s.draft_ms, sum.target_ms += s.target_ms, sum.prefill_ms += s.prefill_ms;
}

KResult measure_k(Models& m, const Options& o, const std::vector<std::vector<int>>& prompts, int k, float temperature) {
    KResult r;
    r.k = k;
    std::vector<double> plain_ms, spec_ms, ratios, cpu_ratios;
    for (int rep = -1; rep < o.repeats; rep++) {  // rep -1: warm-up, not kept
        double plain = 0, spec = 0;
        r.stats = {}, r.tokens = 0, r.decode_ms = 0, r.decode_steps = 0, r.draft_steps = 0;
        for (std::size_t i = 0; i < prompts.size(); i++) {
            SpeculativeOptions so;
            so.k = k, so.max_new_tokens = o.n, so.stop_at_eos = false;
            so.sampler = {temperature, 0, 1.0f, o.seed + i};
            GenerateOptions g;
            g.max_new_tokens = o.n, g.stop_at_eos = false, g.sampler = so.sampler;
            const std::clock_t c0 = std::clock();
            GenerateResult base = generate(*m.target.engine, prompts[i], g);
            const std::clock_t c1 = std::clock();
            SpeculativeResult s = speculative_generate(*m.target.engine, *m.draft.engine, prompts[i], so,
                                                       your_rule(temperature == 0.0f));
            const std::clock_t c2 = std::clock();
            if (rep >= 0 && c2 > c1) cpu_ratios.push_back(double(c1 - c0) / double(c2 - c1));
            plain += base.total_ms, spec += s.total_ms;
            if (rep >= 0) ratios.push_back(base.total_ms / s.total_ms);
            add(r.stats, s.stats);
            for (double ms : base.decode_ms) r.decode_ms += ms;
            r.decode_steps += int(base.decode_ms.size());
            r.draft_steps += s.stats.draft_passes - 1;  // the first is the prompt's
            r.tokens += int(s.generated_ids.size());
            if (temperature == 0.0f && s.generated_ids != base.generated_ids) r.identical = false;
        }
        if (rep >= 0) plain_ms.push_back(plain), spec_ms.push_back(spec);
    }
    r.plain_ms = summarize(plain_ms).median, r.spec_ms = summarize(spec_ms).median;
    r.ratio = summarize(ratios).median;
    r.cpu_ratio = cpu_ratios.empty() ? 0.0 : summarize(cpu_ratios).median;
    return r;
}


std::string row_text(const KResult& r) {
    const double rounds = std::max(r.stats.rounds, 1);
    return fmt::format("  {:>2} {:>9.1f}% {:>6.3f} {:>10.2f} {:>10.2f} {:>10.3f} {:>10.3f} {:>10.0f} {:>10.0f} {:>8.2f}x {:>8.2f}x  {}\n",
                       r.k, 100.0 * r.stats.acceptance_rate(), r.stats.per_token_acceptance(), r.tokens_per_pass(),
                       r.predicted(), r.stats.draft_ms / rounds,
                       r.stats.target_ms / rounds, 1000.0 * r.tokens / r.plain_ms, 1000.0 * r.tokens / r.spec_ms,
                       r.speedup(), r.cpu_ratio, r.identical ? "yes" : "NO  <-- differs from plain greedy");
}


// The speed-up a round's costs allow: tok/pass target tokens for the time of
// k draft steps and one verify pass, all in plain decode steps.
double model_speedup(double tokens_per_pass, int k, double draft_cost, double verify_cost) {
    return tokens_per_pass / (k * draft_cost + verify_cost);
}


}  // namespace

std::vector<KResult> sweep(Models& m, const Options& o, const std::vector<std::vector<int>>& prompts) {
    std::printf("greedy speculation, your accept_greedy (per round: draft = k draft passes, target = one verify pass)\n");
    std::printf("  %2s %10s %6s %10s %10s %10s %10s %10s %10s %9s %9s  %s\n", "k", "accepted", "alpha", "tok/pass", "predicted",
                "draft ms", "target ms", "plain t/s", "spec t/s", "speed-up", "(cpu)", "identical");
    std::vector<KResult> rows;
    for (int k : o.ks) {
        rows.push_back(measure_k(m, o, prompts, k, 0.0f));
        std::fputs(row_text(rows.back()).c_str(), stdout);
        std::fflush(stdout);
    }
    std::printf("  accepted: kept / proposed; alpha: kept / judged (the kept tokens plus one per rejection);\n"
                "  tok/pass: per verify pass; predicted = your expected_tokens_per_pass(alpha, k);\n"
                "  speed-up: wall time, (cpu): CPU time of this process, which a loaded machine inflates less\n\n");
    return rows;
}

// Section "where it pays": the sweep's speed-ups explained by three measured
// costs, then the same alpha priced at the costs of a memory-bound target.
void where_it_pays(const std::vector<KResult>& rows) {
    std::printf("where speculation pays: a round yields tok/pass tokens for the time of k draft steps and one\n"
                "verify pass; in plain decode steps of the target that is k*c + v (c: one draft step, v: the verify pass)\n");
    std::printf("  %2s %10s %8s %8s %10s %10s %14s %10s\n", "k", "decode ms", "c", "v", "k*c + v", "tok/pass",
                "model speed-up", "measured");
    for (const KResult& r : rows)
        std::printf("  %2d %10.3f %8.3f %8.3f %10.2f %10.2f %13.2fx %9.2fx\n", r.k, r.decode_step_ms(), r.draft_cost(),
                    r.verify_cost(), r.k * r.draft_cost() + r.verify_cost(), r.tokens_per_pass(),
                    model_speedup(r.tokens_per_pass(), r.k, r.draft_cost(), r.verify_cost()), r.speedup());
    // A target whose decode step streams its weights (memory-bound: a 7B model
    // on a GPU) verifies k + 1 rows for about one step's time, and a draft 20x
    // smaller costs about 1/20 of a step. Assumed costs, not measured here.
    const double big_c = 0.05, big_v = 1.1;
    const KResult& last = rows.back();
    const double alpha = last.stats.per_token_acceptance();
    std::printf("  speculation pays where tok/pass > k*c + v. At k = %d here a round costs %.2f decode steps for\n"
                "  %.2f tokens. The same alpha (%.2f) with c = %.2f and v = %.1f (assumed: a memory-bound target,\n"
                "  20x the draft's size, README \"Where it pays\") would give %.2fx.\n\n",
                last.k, last.k * last.draft_cost() + last.verify_cost(), last.tokens_per_pass(), alpha, big_c, big_v,
                model_speedup(expected_tokens_per_pass(alpha, last.k), last.k, big_c, big_v));
}

const KResult& best_of(const std::vector<KResult>& rows) {
    return *std::max_element(rows.begin(), rows.end(),
                             [](const KResult& a, const KResult& b) { return a.speedup() < b.speedup(); });
}

// Section "sampling": the best k at --temperature, with your sampling rule.
KResult sampling(Models& m, const Options& o, const std::vector<std::vector<int>>& prompts, int k) {
    std::printf("sampling at temperature %.2f, k = %d (the best greedy k), your accept_sampled\n", o.temperature, k);
    KResult r = measure_k(m, o, prompts, k, o.temperature);
    std::printf("  acceptance %.1f%% (alpha %.3f), %.2f tokens per verify pass (predicted %.2f), %.0f tokens/s against %.0f "
                "plain: %.2fx (CPU time: %.2fx)\n  (the tokens differ from the plain run's: both are samples of the same "
                "distribution, drawn differently)\n\n",
                100.0 * r.stats.acceptance_rate(), r.stats.per_token_acceptance(), r.tokens_per_pass(),
                r.predicted(), 1000.0 * r.tokens / r.spec_ms,
                1000.0 * r.tokens / r.plain_ms, r.speedup(), r.cpu_ratio);
    return r;
}

json row_json(const KResult& r) {
    return {{"k", r.k}, {"proposed", r.stats.proposed}, {"accepted", r.stats.accepted},
            {"rounds", r.stats.rounds}, {"target_passes", r.stats.target_passes}, {"tokens", r.tokens},
            {"rejections", r.stats.rejections}, {"acceptance_rate", r.stats.acceptance_rate()},
            {"alpha", r.stats.per_token_acceptance()}, {"tokens_per_verify_pass", r.tokens_per_pass()},
            {"predicted_tokens_per_pass", r.predicted()},
            {"draft_ms", r.stats.draft_ms}, {"target_ms", r.stats.target_ms},
            {"plain_ms", r.plain_ms}, {"speculative_ms", r.spec_ms}, {"speedup", r.speedup()},
            {"speedup_cpu_time", r.cpu_ratio},
            {"identical", r.identical}};
}

void write_csv(const fs::path& dir, const std::vector<KResult>& rows) {
    std::ofstream f(dir / "sweep.csv");
    if (!f) fail("cannot write {}", (dir / "sweep.csv").string());
    f << "k,acceptance,alpha,tokens_per_pass,predicted,draft_ms_per_round,target_ms_per_round,plain_tok_s,spec_tok_s,speedup\n";
    for (const KResult& r : rows) {
        const double rounds = std::max(r.stats.rounds, 1);
        f << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", r.k, r.stats.acceptance_rate(),
                         r.stats.per_token_acceptance(), r.tokens_per_pass(),
                         r.predicted(), r.stats.draft_ms / rounds,
                         r.stats.target_ms / rounds, 1000.0 * r.tokens / r.plain_ms,
                         1000.0 * r.tokens / r.spec_ms, r.speedup());
    }
}

}  // namespace pd::lab13
