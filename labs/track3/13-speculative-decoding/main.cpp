// Lab 13: speculative decoding. A small draft model (tiny-draft) proposes k
// tokens, the target (tiny) checks them in one pass, and YOUR accept rules
// (exercise.cpp) decide what is kept; the engine's loop
// (pd::speculative_generate) does the rest.
//
//   rules    your rules once on small hand-made rounds (exit 3 while missing)
//   sweep    k = 1..8, greedy: acceptance rate, tokens per target pass (measured
//            and as your expected_tokens_per_pass predicts), draft and target
//            time per round, tokens/s against plain decoding measured in the
//            same run, and whether the tokens are identical (they must be)
//   sampling the best k again at a temperature, with your sampling rule
// Each run writes sweep.csv into --out; plot.py draws it.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "engine/generate.hpp"
#include "lab_main.hpp"
#include "base/timing.hpp"
#include "plot.hpp"

using namespace pd;
using namespace pd::lab13;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Options {
    cli::CommonOptions lab;
    std::string draft = "tiny-draft";
    std::vector<int> ks = {1, 2, 3, 4, 5, 6, 7, 8};
    int n = 128;                 // tokens generated per prompt
    int prompts = 3;
    int repeats = 3;
    float temperature = 0.8f;    // the sampling section
    std::uint64_t seed = 13;
    std::string out = "lab13-results";
    bool no_plot = false;
};

// Both models and their engines (one sequence each).
struct Models {
    cli::Session target, draft;
};

const char* kOpenings[] = {"Once upon a time, there was a little girl named",
                           "The dog ran to the park and saw", "One day, Tom found a big red box. He",
                           "Lily and her mom went to the beach. The sun", "There was a small bird who"};

// Story openings as the target's tokenizer spells them; seeded random ids for
// a synthetic model whose vocabulary cannot spell text.
std::vector<std::vector<int>> make_prompts(const Options& o, const Models& m) {
    std::vector<std::vector<int>> out;
    std::mt19937_64 rng(o.seed);
    const int vocab = m.target.loaded.model->config.vocab_size;
    for (int i = 0; i < o.prompts; i++) {
        try {
            out.push_back(m.target.loaded.tokenizer.encode(kOpenings[i % std::size(kOpenings)]));
        } catch (const UserError&) {
            std::vector<int> ids(12);
            for (int& t : ids) t = int(rng() % std::uint64_t(vocab));
            out.push_back(ids);
        }
    }
    return out;
}

AcceptRule your_rule(bool greedy) {
    if (greedy) return [](const Proposal& p, Rng&) { return accept_greedy(p); };
    return [](const Proposal& p, Rng& rng) { return accept_sampled(p, rng); };
}

// One k over every prompt. Each prompt runs plain, then speculative, back to
// back: the pair sees the same machine load, so its time ratio is the
// speed-up; the median over pairs ignores a pair a load spike hit.
struct KResult {
    int k = 0;
    SpeculativeStats stats;      // summed over the prompts (last repeat)
    int tokens = 0;              // generated over the prompts (last repeat)
    double plain_ms = 0, spec_ms = 0;  // medians over repeats of the time for all prompts
    double ratio = 0;            // median over pairs of plain ms / speculative ms
    double cpu_ratio = 0;        // the same with the process's CPU time (std::clock): blind to
                                 // the time other jobs held the core, which wall time counts
    bool identical = true;       // greedy: speculative tokens == plain tokens
    double decode_ms = 0;        // the plain runs' model-side decode steps (last repeat) ...
    int decode_steps = 0;        // ... and how many
    int draft_steps = 0;         // the draft's passes after the prompt (last repeat)
    // Tokens per verify pass: what each round emitted (its kept draft tokens and
    // the target's own), the prompt's pass and its one token left out, since
    // expected_tokens_per_pass predicts a round.
    double tokens_per_pass() const { return stats.rounds ? double(stats.accepted + stats.rounds) / stats.rounds : 0; }
    double predicted() const { return expected_tokens_per_pass(stats.per_token_acceptance(), k); }
    double speedup() const { return ratio; }
    // The costs of a round in plain decode steps of the target (engine time):
    // c, one draft step, and v, one verify pass over k + 1 rows.
    double decode_step_ms() const { return decode_steps ? decode_ms / decode_steps : 0; }
    double draft_cost() const { return draft_steps ? stats.draft_ms / draft_steps / decode_step_ms() : 0; }
    double verify_cost() const { return stats.rounds ? stats.target_ms / stats.rounds / decode_step_ms() : 0; }
};

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

// Section "rules": your three functions once on small rounds.
void try_exercises() {
    std::vector<int> draft = {1};
    std::vector<float> logits = {0, 1, 0, 0, 0, 1}, p = {0, 1, 0, 0, 0, 1}, q = {0.5f, 0.5f, 0};
    Rng rng(1);
    accept_greedy({1, 3, draft, logits, {}, {}});
    accept_sampled({1, 3, draft, logits, p, q}, rng);
    expected_tokens_per_pass(0.5, 1);
}

void print_header(const Options& o, const Models& m) {
    const Config &t = m.target.engine->config(), &d = m.draft.engine->config();
    std::printf("Lab 13: speculative decoding\n");
    std::printf("target   %s (%d layers, dim %d, vocab %d), %s, %s\n", o.lab.model.c_str(), t.n_layers, t.dim,
                t.vocab_size, o.lab.precision.c_str(), device_name(m.target.engine->device()));
    std::printf("draft    %s (%d layers, dim %d, vocab %d)\n", o.draft.c_str(), d.n_layers, d.dim, d.vocab_size);
    std::printf("hardware %s\n", m.target.engine->hardware().c_str());
    std::printf("workload %d prompts x %d new tokens, %d timed repeats per k (each prompt plain, then "
                "speculative: speed-up = median of the pairs' time ratios)\n\n", o.prompts, o.n, o.repeats);
}

std::string row_text(const KResult& r) {
    const double rounds = std::max(r.stats.rounds, 1);
    return fmt::format("  {:>2} {:>9.1f}% {:>6.3f} {:>10.2f} {:>10.2f} {:>10.3f} {:>10.3f} {:>10.0f} {:>10.0f} {:>8.2f}x {:>8.2f}x  {}\n",
                       r.k, 100.0 * r.stats.acceptance_rate(), r.stats.per_token_acceptance(), r.tokens_per_pass(),
                       r.predicted(), r.stats.draft_ms / rounds,
                       r.stats.target_ms / rounds, 1000.0 * r.tokens / r.plain_ms, 1000.0 * r.tokens / r.spec_ms,
                       r.speedup(), r.cpu_ratio, r.identical ? "yes" : "NO  <-- differs from plain greedy");
}

// Section "sweep": k = 1..8, greedy, with your greedy rule.
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

// The speed-up a round's costs allow: tok/pass target tokens for the time of
// k draft steps and one verify pass, all in plain decode steps.
double model_speedup(double tokens_per_pass, int k, double draft_cost, double verify_cost) {
    return tokens_per_pass / (k * draft_cost + verify_cost);
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

void check_options(const Options& o) {
    if (o.ks.empty()) fail("--ks needs at least one k");
    for (int k : o.ks)
        if (k < 1 || k > 64) fail("every --ks value must be from 1 to 64, got {}", k);
    if (o.n < 2) fail("--new-tokens must be at least 2, got {}", o.n);
    if (o.prompts < 1 || o.prompts > 64) fail("--prompts must be from 1 to 64, got {}", o.prompts);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    if (!(o.temperature > 0.0f && o.temperature <= 10.0f)) fail("--temperature must be in (0, 10], got {}", o.temperature);
}

fs::path make_out_dir(const std::string& out) {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec || !fs::is_directory(out)) fail("cannot create the output folder {}: {}", out, ec.message());
    return fs::path(out);
}

int run(Options& o) {
    check_options(o);
    try_exercises();
    const int longest_k = *std::max_element(o.ks.begin(), o.ks.end());
    Models m{cli::load_session(o.lab), {}};
    cli::CommonOptions d = o.lab;
    d.model = o.draft;
    m.draft = cli::load_session(d);
    const std::vector<std::vector<int>> prompts = make_prompts(o, m);  // needs no engine: tokenizer only
    std::size_t longest_prompt = 0;
    for (const auto& p : prompts) longest_prompt = std::max(longest_prompt, p.size());
    const std::int64_t positions = std::int64_t(longest_prompt) + std::max(o.n, longest_k + 1);
    cli::start_engine(m.target, o.lab, 1, positions);
    cli::start_engine(m.draft, d, 1, positions);
    check_speculation(*m.target.engine, *m.draft.engine, longest_prompt, {longest_k, o.n, {}, false, 0});
    const fs::path dir = make_out_dir(o.out);
    print_header(o, m);
    std::vector<KResult> rows = sweep(m, o, prompts);
    where_it_pays(rows);
    const KResult& best = best_of(rows);
    std::printf("best k = %d: %.2fx the tokens/s of plain decoding (load: see `uptime`; compare ratios, not times)\n\n",
                best.k, best.speedup());
    KResult sampled = sampling(m, o, prompts, best.k);
    write_csv(dir, rows);
    json j = {{"lab", "13-speculative-decoding"}, {"model", o.lab.model}, {"draft", o.draft},
              {"precision", o.lab.precision}, {"device", device_name(m.target.engine->device())},
              {"hardware", m.target.engine->hardware()}, {"threads", omp_get_max_threads()},
              {"new_tokens", o.n}, {"prompts", o.prompts}, {"repeats", o.repeats}, {"best_k", best.k},
              {"sampling", row_json(sampled)}, {"expected_example", expected_tokens_per_pass(0.8, 4)}};
    for (const KResult& r : rows) j["sweep"].push_back(row_json(r));
    for (const KResult& r : rows)
        j["greedy_counts"].push_back({{"k", r.k}, {"proposed", r.stats.proposed}, {"accepted", r.stats.accepted},
                                      {"target_passes", r.stats.target_passes}, {"identical", r.identical}});
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track3/13-speculative-decoding", dir, o.no_plot, "speculative.png and .svg");
    bool ok = std::all_of(rows.begin(), rows.end(), [](const KResult& r) { return r.identical; });
    return lab::finish(ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app(
        "Lab 13: speculative decoding. A small draft model proposes k tokens, the target checks all\n"
        "of them in ONE forward pass over its KV cache (the k+1 rows cost about what one decode row\n"
        "does: decode is memory-bound), and your accept rule keeps a prefix plus one token of the\n"
        "target's own; the engine rolls both caches back past the rest.\n"
        "  sweep     k = 1..8, greedy with your accept_greedy: acceptance rate, tokens per target\n"
        "            pass (measured and predicted by your expected_tokens_per_pass), draft and target\n"
        "            time per round, tokens/s against plain decoding, and a check that the tokens are\n"
        "            identical to plain greedy decoding (exit 1 if not)\n"
        "  sampling  the best k at --temperature with your accept_sampled\n"
        "Writes sweep.csv into --out and draws it with plot.py. On a shared machine use --threads 1.\n\n"
        "Example: 13-speculative-decoding --threads 1\n"
        "         13-speculative-decoding --ks 2,4,6 --new-tokens 256 --draft tiny-draft",
        "13-speculative-decoding");
    cli::add_common(&app, o.lab);
    app.add_option("--draft", o.draft, "the draft model (same tokenizer as --model)")->capture_default_str();
    app.add_option("--ks", o.ks, "draft tokens per round to sweep, e.g. 1,2,4,8")->delimiter(',');
    app.add_option("--new-tokens,-n", o.n, "tokens generated per prompt")->capture_default_str();
    app.add_option("--prompts", o.prompts, "story openings to generate from (1 to 64)")->capture_default_str();
    app.add_option("--repeats,-r", o.repeats, "timed repeats per k (the median is compared)")->capture_default_str();
    app.add_option("--temperature", o.temperature, "temperature of the sampling section")->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the sampling section (and of random prompts)")->capture_default_str();
    app.add_option("--out,-o", o.out, "folder for sweep.csv and the plots")->capture_default_str();
    app.add_flag("--no-plot", o.no_plot, "write the CSV only; print the command that draws it");
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
