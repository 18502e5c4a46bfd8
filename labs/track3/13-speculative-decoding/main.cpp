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
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab13.hpp"
#include "lab_main.hpp"
#include "plot.hpp"
#include "results.hpp"

using namespace pd;
using namespace pd::lab13;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
void check_options(const Options& o) {
    if (o.ks.empty()) fail("--ks needs at least one k");
    for (int k : o.ks)
        if (k < 1 || k > 64) fail("every --ks value must be from 1 to 64, got {}", k);
    if (o.n < 2) fail("--new-tokens must be at least 2, got {}", o.n);
    if (o.prompts < 1 || o.prompts > 64) fail("--prompts must be from 1 to 64, got {}", o.prompts);
    if (o.repeats < 1) fail("--repeats must be at least 1, got {}", o.repeats);
    if (!(o.temperature > 0.0f && o.temperature <= 10.0f)) fail("--temperature must be in (0, 10], got {}", o.temperature);
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
    const fs::path dir = lab::make_out_dir(o.out);
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
    lab::CommandLine cl(
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
    cl.common(o.lab);
    cl.option("--draft", o.draft, "the draft model (same tokenizer as --model)").show_default();
    cl.option("--ks", o.ks, "draft tokens per round to sweep, e.g. 1,2,4,8").list();
    cl.option("--new-tokens,-n", o.n, "tokens generated per prompt").show_default();
    cl.option("--prompts", o.prompts, "story openings to generate from (1 to 64)").show_default();
    cl.option("--repeats,-r", o.repeats, "timed repeats per k (the median is compared)").show_default();
    cl.option("--temperature", o.temperature, "temperature of the sampling section").show_default();
    cl.option("--seed", o.seed, "seed of the sampling section (and of random prompts)").show_default();
    cl.option("--out,-o", o.out, "folder for sweep.csv and the plots").show_default();
    cl.flag("--no-plot", o.no_plot, "write the CSV only; print the command that draws it");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
