// engine.speculative: rolling a sequence back (Engine::truncate), verifying k
// draft tokens in one target pass, and the draft-verify-accept loop
// (src/engine/speculative.hpp): greedy speculation gives the target's own
// greedy tokens, and the sampling rule keeps the target's distribution.
#include <algorithm>
#include <string>
#include <vector>

#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/generate.hpp"
#include "engine/speculative.hpp"
#include "load/model_source.hpp"

using namespace pd;
using namespace pd::test;

namespace {

const char* kSmallLlama = "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64";
// The same with a sliding window shorter than the prompt (Mistral's).
const char* kSmallMistral = "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64,window=7";

std::vector<int> tokens_of(int n, int vocab, std::uint64_t seed) {
    std::mt19937_64 rng(seed_for(seed));
    std::vector<int> t(n);
    for (int& x : t) x = int(rng() % std::uint64_t(vocab));
    return t;
}

std::vector<float> copy_rows(const float* p, int rows, int vocab) {
    return std::vector<float>(p, p + std::size_t(rows) * vocab);
}

std::vector<float> decode_one(Engine& e, int token) {
    int slot = 0;
    const float* p = e.decode({&slot, 1}, {&token, 1});
    return std::vector<float>(p, p + e.config().vocab_size);
}

}  // namespace

TEST_CASE("engine.speculative.truncate_then_decode_equals_never_decoded") {
    auto lm = load_model(kSmallLlama, Precision::f32, false);
    auto rolled = make_engine(lm.model, {});
    auto fresh = make_engine(lm.model, {});
    const auto prompt = tokens_of(9, 97, 1), dropped = tokens_of(5, 97, 2), kept = tokens_of(4, 97, 3);
    rolled->prefill(0, prompt);
    for (int t : dropped) decode_one(*rolled, t);  // positions 9..13, then thrown away
    rolled->truncate(0, int(prompt.size()));
    CHECK(rolled->cache_len(0) == int(prompt.size()));
    fresh->prefill(0, prompt);
    for (std::size_t i = 0; i < kept.size(); i++) {
        // The same kernels on the same rows: exactly equal, not merely close. A
        // difference means the dropped rows were still read (attention past
        // seq_len) or the new row went to the wrong position.
        std::vector<float> got = decode_one(*rolled, kept[i]), want = decode_one(*fresh, kept[i]);
        check_close(got, want, 0.0f, 0.0f, fmt::format("decode {} after truncating 5 tokens away", i));
    }
    CHECK(rolled->cache_len(0) == fresh->cache_len(0));
}

TEST_CASE("engine.speculative.truncate_refuses_growth_and_bad_slots") {
    auto lm = load_model(kSmallLlama, Precision::f32, false);
    auto e = make_engine(lm.model, {});
    e->prefill(0, tokens_of(6, 97, 4));
    CHECK_THROWS_WITH_AS(e->truncate(0, 7), doctest::Contains("it holds 6"), UserError);
    CHECK_THROWS_WITH_AS(e->truncate(0, -1), doctest::Contains("from 0 to 6"), UserError);
    CHECK_THROWS_WITH_AS(e->truncate(1, 0), doctest::Contains("outside the cache's batch of 1"), UserError);
    CHECK(e->cache_len(0) == 6);  // a refused truncation changes nothing
    e->truncate(0, 6);            // to its own length: a no-op
    e->truncate(0, 0);            // to nothing: like reset
    CHECK(e->cache_len(0) == 0);
}

TEST_CASE("engine.speculative.verify_pass_equals_decode_steps") {
    // The verify pass: k+1 tokens appended to an existing cache in one
    // prefill, Keep::all. Row i must be what decoding them one by one gives.
    for (const char* spec : {kSmallLlama, kSmallMistral}) {
        INFO(spec);
        auto lm = load_model(spec, Precision::f32, false);
        for (int k : {1, 4, 8, 17}) {  // 18 rows: past the small-row kernels, on oneDNN's path
            auto one_pass = make_engine(lm.model, {}), stepwise = make_engine(lm.model, {});
            const auto prompt = tokens_of(11, 97, 10 + k), rows = tokens_of(k + 1, 97, 20 + k);
            one_pass->prefill(0, prompt);
            stepwise->prefill(0, prompt);
            auto all = copy_rows(one_pass->prefill(0, rows, Keep::all), k + 1, 97);
            CHECK(one_pass->cache_len(0) == 11 + k + 1);
            for (int i = 0; i <= k; i++)
                check_close(decode_one(*stepwise, rows[i]).data(), all.data() + std::size_t(i) * 97, 97, 2e-4f,
                            2e-4f, fmt::format("k = {}: row {} of the verify pass against decode step {}", k, i, i));
        }
    }
}

namespace {

// tiny and tiny-draft, loaded once for the cases below.
struct Pair {
        LoadedModel target = load_model("tiny", Precision::f32, false);
        LoadedModel draft = load_model("tiny-draft", Precision::f32, false);
};
const Pair& bundled() {
        static const Pair p;
        return p;
}

// Story openings, and seeded random word salads (PDLAB_TEST_SEED picks them).
std::vector<std::vector<int>> story_prompts(const Tokenizer& tok) {
        std::vector<std::string> texts = {"Once upon a time", "Lily and Tom went to the park. They saw",
                                          "The little dog was sad because"};
        const char* words[] = {"the", "cat", "big", "red", "ball", "girl", "happy", "tree", "said", "sun"};
        std::mt19937_64 rng(seed_for(7));
        std::string salad;
        for (int i = 0; i < 12; i++) salad += std::string(i ? " " : "") + words[rng() % 10];
        texts.push_back(salad);
        std::vector<std::vector<int>> out;
        for (const auto& t : texts) out.push_back(tok.encode(t));
        return out;
}

std::vector<int> plain_greedy(Engine& e, const std::vector<int>& prompt, int n) {
        GenerateOptions g;
        g.max_new_tokens = n;
        g.stop_at_eos = false;
        return generate(e, prompt, g).generated_ids;
}

SpeculativeResult speculate(Engine& t, Engine& d, const std::vector<int>& prompt, int k, int n,
                                float temperature = 0.0f, const AcceptRule& rule = {}) {
        SpeculativeOptions o;
        o.k = k;
        o.max_new_tokens = n;
        o.stop_at_eos = false;
        o.sampler = {temperature, 0, 1.0f, seed_for(11)};
        return speculative_generate(t, d, prompt, o, rule);
}

}  // namespace

// The target lists several EOS ids: greedy speculation stops where plain
// greedy does, at the first of them, even when it lies inside a run of
// accepted draft tokens, the 2nd or 3rd id of the list too.
TEST_CASE("engine.speculative.stops_at_any_eos_id") {
    auto draft = make_engine(bundled().draft.model, {});
    const std::vector<int> prompt = story_prompts(bundled().target.tokenizer)[0];
    auto plain = make_engine(bundled().target.model, {});
    const std::vector<int> free_run = plain_greedy(*plain, prompt, 24);
    for (std::size_t p : {5, 11})
        for (const std::vector<int>& eos : eos_lists_hitting(free_run, p)) {
            auto model = std::make_shared<Model>(*bundled().target.model);
            model->config.eos_ids = eos;
            auto target = make_engine(model, {});
            for (int k : {1, 4}) {
                INFO("EOS ids " << eos[0] << ", " << eos[1] << ", " << eos[2] << "; output " << p << "; k " << k);
                SpeculativeOptions o;
                o.k = k;
                o.max_new_tokens = 24;
                const SpeculativeResult r = speculative_generate(*target, *draft, prompt, o);
                CHECK(r.generated_ids == until_first(free_run, p));
                CHECK(r.stopped_at_eos);
            }
        }
}

TEST_CASE("engine.speculative.greedy_equals_plain_greedy") {
    auto target = make_engine(bundled().target.model, {}), draft = make_engine(bundled().draft.model, {});
    const int n = 40;
    for (const auto& prompt : story_prompts(bundled().target.tokenizer)) {
        const std::vector<int> want = plain_greedy(*target, prompt, n);
        for (int k = 1; k <= 8; k++) {
            SpeculativeResult r = speculate(*target, *draft, prompt, k, n);
            INFO("k = " << k << ", prompt of " << prompt.size() << " tokens: greedy speculation must "
                 "give the target's own greedy tokens. A difference right after a rejection points at "
                 "the roll-back (Engine::truncate to the wrong length); one after a fully accepted "
                 "round at the draft's catch-up (dk was never fed to it)");
            CHECK(r.generated_ids == want);
            // Bookkeeping: each round keeps a+1 tokens; the prompt pass gave one.
            CHECK(r.stats.target_passes == 1 + r.stats.rounds);
            CHECK(int(r.generated_ids.size()) == 1 + r.stats.accepted + r.stats.rounds);
            CHECK(r.stats.accepted <= r.stats.proposed);
        }
    }
}

TEST_CASE("engine.speculative.draft_equal_to_target_accepts_everything") {
    // The target as its own draft: greedy keeps every proposal, sampling
    // (p = q up to rounding between decode and the verify pass) nearly every
    // one. Low acceptance here means p and q rows are misaligned.
    auto target = make_engine(bundled().target.model, {}), draft = make_engine(bundled().target.model, {});
    const auto prompt = story_prompts(bundled().target.tokenizer)[0];
    SpeculativeResult g = speculate(*target, *draft, prompt, 4, 41);
    CHECK(g.stats.acceptance_rate() == doctest::Approx(1.0));
    CHECK(g.tokens_per_target_pass() == doctest::Approx(41.0 / 9.0));  // 1 + 8 rounds of 5
    SpeculativeResult s = speculate(*target, *draft, prompt, 4, 41, 1.0f);
    INFO("sampling acceptance with the target as its own draft: " << s.stats.acceptance_rate());
    CHECK(s.stats.acceptance_rate() >= 0.97);
}

TEST_CASE("engine.speculative.bad_input") {
    auto target = make_engine(bundled().target.model, {}), draft = make_engine(bundled().draft.model, {});
    auto other = load_model("synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=2,vocab=300,ctx=64",
                            Precision::f32, false);
    auto odd = make_engine(other.model, {});
    const std::vector<int> prompt = {5, 6, 7};
    CHECK_THROWS_WITH_AS(speculate(*target, *odd, prompt, 4, 8),
                         doctest::Contains("vocabulary has 300 ids but the target's has 1497"), UserError);
    CHECK_THROWS_WITH_AS(speculate(*target, *draft, prompt, 0, 8), doctest::Contains("at least 1"), UserError);
    CHECK_THROWS_WITH_AS(speculate(*target, *draft, prompt, 510, 8), doctest::Contains("context length of 512"),
                         UserError);
    AcceptRule too_many = [](const Proposal& p, Rng&) { return Verdict{p.k + 1, 0}; };
    CHECK_THROWS_WITH_AS(speculate(*target, *draft, prompt, 3, 8, 0.0f, too_many),
                         doctest::Contains("must keep 0 to 3"), UserError);
}

namespace {

// A verify round on a small vocabulary with fixed rows: p (k+1, V) for the
// target, q (k, V) for the draft, the draft tokens drawn from q.
struct SmallVocabRound {
    int k = 3, V = 6;
    std::vector<float> p, q, logp;
};

std::vector<float> random_distribution(int V, Rng& rng) {
    std::normal_distribution<float> z(0.0f, 1.2f);
    std::vector<float> d(V);
    float sum = 0;
    for (float& x : d) sum += (x = std::exp(z(rng)));
    for (float& x : d) x /= sum;
    return d;
}

double total_variation(std::span<const float> a, std::span<const double> b) {
    double tv = 0;
    for (std::size_t i = 0; i < a.size(); i++) tv += std::fabs(a[i] - b[i]);
    return tv / 2;
}

// Rows where the draft is clearly wrong (0.2 <= TV(p_i, q_i) <= 0.35), so a
// rule that ignores the difference shows it, yet right often enough that
// every position gets samples (each is kept with probability 1 - TV).
bool in_band(double tv) { return tv >= 0.2 && tv <= 0.35; }

// How far from p the tokens of the rule that resamples from p (not the
// residual) land: it emits min(p, q) + TV(p, q) * p.
double resample_from_p_error(const std::vector<float>& p, const std::vector<float>& q) {
    double tv = 0, err = 0;
    for (std::size_t j = 0; j < p.size(); j++) tv += std::fabs(p[j] - q[j]) / 2;
    for (std::size_t j = 0; j < p.size(); j++) err += std::fabs(std::min(p[j], q[j]) + tv * p[j] - p[j]) / 2;
    return err;
}

SmallVocabRound make_round(std::uint64_t seed) {
    SmallVocabRound s;
    Rng rng(seed_for(seed));
    for (int i = 0; i <= s.k; i++) {
        std::vector<float> p = random_distribution(s.V, rng), q;
        do q = random_distribution(s.V, rng);
        while (i < s.k && !(in_band(total_variation(p, std::vector<double>(q.begin(), q.end()))) &&
                            resample_from_p_error(p, q) >= 0.05));
        s.p.insert(s.p.end(), p.begin(), p.end());
        if (i < s.k) s.q.insert(s.q.end(), q.begin(), q.end());
    }
    for (float x : s.p) s.logp.push_back(std::log(x));
    return s;
}

// Runs `rule` `rounds` times; returns, per position j, the largest total
// variation distance between the tokens emitted at j and p_j, and the
// fewest samples any position had.
std::pair<double, long> worst_distance(const SmallVocabRound& s, const AcceptRule& rule, long rounds) {
    Rng rng(seed_for(99));
    std::vector<std::vector<long>> counts(s.k + 1, std::vector<long>(s.V, 0));
    std::vector<int> draft(s.k);
    for (long n = 0; n < rounds; n++) {
        for (int i = 0; i < s.k; i++)
            draft[i] = draw_from(std::span<const float>(s.q).subspan(std::size_t(i) * s.V, s.V), rng);
        Proposal pr{s.k, s.V, draft, s.logp, s.p, s.q};
        Verdict v = rule(pr, rng);
        for (int j = 0; j <= v.accepted; j++) counts[j][j < v.accepted ? draft[j] : v.next]++;
    }
    double worst = 0;
    long fewest = rounds;
    for (int j = 0; j <= s.k; j++) {
        long total = 0;
        for (long c : counts[j]) total += c;
        std::vector<double> freq(s.V);
        for (int t = 0; t < s.V; t++) freq[t] = double(counts[j][t]) / double(std::max(total, 1L));
        worst = std::max(worst, total_variation(std::span<const float>(s.p).subspan(std::size_t(j) * s.V, s.V), freq));
        fewest = std::min(fewest, total);
    }
    return {worst, fewest};
}

}  // namespace

TEST_CASE("engine.speculative.sampling_rule_keeps_the_target_distribution") {
    // Every token the rule emits at position j (a kept draft token, the
    // resample after a rejection, or the bonus) must follow p_j, whatever q
    // is. 200,000 rounds leave >= 20,000 samples at every position; the
    // sampling error of the distance is then about 0.004, so a tolerance of
    // 0.015 is never hit by a right rule, and a rule off by 0.05 always fails.
    const double tolerance = 0.015;
    const long rounds = 200000;
    for (std::uint64_t seed : {1, 2, 3}) {
        SmallVocabRound s = make_round(seed);
        auto [dist, fewest] = worst_distance(s, sampling_accept, rounds);
        INFO("seed " << seed << ": the emitted tokens are " << dist << " (total variation) from p at the "
             "worst position; a right rule stays under " << tolerance << ". Resampling from p instead of "
             "norm(max(0, p - q)), or accepting with p/q without the min(1, .), both show up here");
        REQUIRE(fewest >= 20000);
        CHECK(dist <= tolerance);
        // Negative controls: the same test catches two wrong rules.
        AcceptRule always_accept = [](const Proposal& pr, Rng& rng) {
            return Verdict{pr.k, draw_from(pr.target_probs.subspan(std::size_t(pr.k) * pr.vocab, pr.vocab), rng)};
        };
        AcceptRule resample_from_p = [](const Proposal& pr, Rng& rng) {
            std::uniform_real_distribution<double> unit(0.0, 1.0);
            for (int i = 0; i < pr.k; i++) {
                auto p = pr.target_probs.subspan(std::size_t(i) * pr.vocab, pr.vocab);
                auto q = pr.draft_probs.subspan(std::size_t(i) * pr.vocab, pr.vocab);
                if (unit(rng) * q[pr.draft[i]] >= p[pr.draft[i]]) return Verdict{i, draw_from(p, rng)};
            }
            return Verdict{pr.k, draw_from(pr.target_probs.subspan(std::size_t(pr.k) * pr.vocab, pr.vocab), rng)};
        };
        CHECK(worst_distance(s, always_accept, rounds).first > 3 * tolerance);
        CHECK(worst_distance(s, resample_from_p, rounds).first > 2 * tolerance);
    }
}

TEST_CASE("engine.speculative.sampling_distribution_is_the_samplers") {
    // p and q must be what pd::sample draws from, top-k and top-p included.
    auto logits = randn(50, 5);
    SamplerConfig cfg{0.7f, 10, 0.9f, 3};
    std::vector<float> probs(50);
    sampling_distribution(logits.data(), 50, cfg, probs);
    Sampler s = make_sampler(cfg, 50);
    std::vector<double> freq(50, 0.0);
    const int n = 100000;
    for (int i = 0; i < n; i++) freq[sample(s, logits.data(), 50)] += 1.0 / n;
    int support = 0;
    for (int i = 0; i < 50; i++) {
        support += probs[i] > 0;
        if (probs[i] == 0) CHECK(freq[i] == 0.0);  // outside top-k / top-p: never drawn
    }
    CHECK(support <= 10);
    CHECK(total_variation(probs, freq) <= 0.01);
    // Without top-k and top-p: the plain softmax, every id.
    std::vector<float> all(50), ranked(50);
    sampling_distribution(logits.data(), 50, {0.7f, 0, 1.0f, 3}, all);
    sampling_distribution(logits.data(), 50, {0.7f, 50, 0.99999994f, 3}, ranked);  // ranks, keeps (nearly) all
    double sum = 0;
    for (float x : all) sum += x;
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    check_close(all, ranked, 1e-6f, 1e-4f, "softmax without top-k/top-p against the ranked path");
}
