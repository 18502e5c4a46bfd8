// The scheduler (src/serve/scheduler.hpp) over a fake ServingEngine whose
// "model" is a hash of each sequence's whole cached history, so any mistake in
// what the scheduler feeds (a token skipped, repeated, or fed to the wrong
// sequence, a recompute that forgets the output) changes the next token; then
// over the real tiny model through SlotServingEngine and PagedServingEngine.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <set>

#include <doctest/doctest.h>

#include "check.hpp"
#include "common.hpp"
#include "engine/engine.hpp"
#include "engine/generate.hpp"
#include "engine/sampler.hpp"
#include "load/model_source.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/replay.hpp"
#include "serve/scheduler.hpp"
#include "serve/slot_serving_engine.hpp"

// Counts every allocation in this test binary (the steady-state check reads
// it). Every plain and nothrow form of new and delete, single and array, is
// replaced, so that each pair meets: the library's std::nothrow new (the
// temporary buffer of std::stable_sort) must not be freed by a sanitizer's
// delete, nor ours by its. GCC pairs the inlined new/delete of the library with
// ours and warns.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
static std::atomic<long long> g_allocations{0};
static void* counted_malloc(std::size_t n) noexcept {
    g_allocations++;
    return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n) {
    if (void* p = counted_malloc(n)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace pd::serve;

namespace {

constexpr int kVocab = 50;

// The fake model's next token after `history`: a hash of every token and its
// position; with a `window`, of the last `window` tokens only (and their place
// in it), a model whose outputs soon loop, as a small model's greedy ones do.
int next_token(std::span<const int> history, int window = 0) {
    if (window > 0 && int(history.size()) > window) history = history.last(std::size_t(window));
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < history.size(); i++) h = (h ^ std::uint64_t(history[i] * 131 + int(i))) * 1099511628211ull;
    return int(h % kVocab);
}

// What one request yields alone: feed the prompt, then each output, hash after each.
std::vector<int> alone(std::vector<int> tokens, int max_tokens, const std::vector<int>& eos = {}, int window = 0) {
    std::vector<int> out;
    while (int(out.size()) < max_tokens) {
        out.push_back(next_token(tokens, window));
        tokens.push_back(out.back());
        if (std::find(eos.begin(), eos.end(), out.back()) != eos.end()) break;
    }
    return out;
}

class FakeEngine final : public ServingEngine {
public:
    FakeEngine(int total_blocks, int block_size = 4, int window = 0)
        : total_(total_blocks), bs_(block_size), window_(window) {
        cfg_.vocab_size = kVocab;
        logits_.resize(256 * kVocab);
    }
    const pd::Config& config() const override { return cfg_; }
    int block_size() const override { return bs_; }
    int total_blocks() const override { return total_; }
    int free_blocks() const override { return total_ - used_; }
    int open(int seq, std::span<const int>) override {
        REQUIRE(!seqs_.count(seq));
        opens++;
        seqs_[seq].cache.reserve(4096);
        return 0;
    }
    bool reserve(int seq, int len) override {
        Seq& s = seqs_.at(seq);
        const int need = (len + bs_ - 1) / bs_, extra = need - s.blocks;
        if (extra > free_blocks()) return false;
        if (extra > 0) s.blocks = need, used_ += extra;
        return true;
    }
    void close(int seq) override {
        used_ -= seqs_.at(seq).blocks;
        seqs_.erase(seq);
    }
    int cached_len(int seq) const override { return int(seqs_.at(seq).cache.size()); }
    void truncate(int seq, int len) override {
        Seq& s = seqs_.at(seq);
        REQUIRE(len <= int(s.cache.size()));
        s.cache.resize(std::size_t(len));
        const int keep = (len + bs_ - 1) / bs_;  // blocks past `len` go back, as the paged engine's do
        used_ -= s.blocks - keep, s.blocks = keep;
    }
    // Row j from an item's end gets a one-hot at the next token after its
    // sequence's history less its last j tokens.
    const float* step(std::span<const SeqWork> work) override {
        if (recording) steps.emplace_back();
        int row = 0;
        for (const SeqWork& w : work) {
            Seq& s = seqs_.at(w.seq);
            s.cache.insert(s.cache.end(), w.tokens.begin(), w.tokens.end());
            REQUIRE_MESSAGE(int(s.cache.size()) <= s.blocks * bs_, "a step ran past the room reserved");
            if (recording) steps.back().push_back(int(w.tokens.size()));
            for (int j = w.logit_rows - 1; j >= 0; j--, row++) {
                REQUIRE(row < 256);
                const auto history = std::span<const int>(s.cache).first(s.cache.size() - std::size_t(j));
                std::fill_n(logits_.data() + row * kVocab, kVocab, 0.0f);
                logits_[std::size_t(row * kVocab + next_token(history, window_))] = 1.0f;
            }
        }
        return logits_.data();
    }
    std::vector<std::vector<int>> steps;  // per step, each item's token count
    bool recording = true;
    int opens = 0;  // sequences started, a preempted one again

private:
    struct Seq {
        std::vector<int> cache;
        int blocks = 0;
    };
    pd::Config cfg_;
    int total_, bs_, window_, used_ = 0;
    std::map<int, Seq> seqs_;
    std::vector<float> logits_;
};

std::vector<Request> random_requests(int n, std::uint64_t seed) {
    std::mt19937_64 rng(pd::test::seed_for(seed));
    std::vector<Request> rs;
    for (int i = 0; i < n; i++) {
        Request r;
        r.id = 100 + i;
        r.prompt.resize(1 + rng() % 20);
        for (int& t : r.prompt) t = int(rng() % kVocab);
        r.max_tokens = 1 + int(rng() % 12);
        rs.push_back(r);
    }
    return rs;
}

// Runs `rs`, adding request i before step 2*i (staggered arrivals); returns each request's tokens.
// `sampling`: by request id, for those not decoded greedily.
std::map<int, std::vector<int>> run_all(Scheduler& s, const std::vector<Request>& rs,
                                        std::map<int, FinishReason>* reasons = nullptr,
                                        const std::map<int, Sampling>* sampling = nullptr) {
    std::map<int, std::vector<int>> out;
    for (int k = 0; k < 10000 && (k < 2 * int(rs.size()) || !s.idle()); k++) {
        if (k % 2 == 0 && k / 2 < int(rs.size())) {
            const Request& r = rs[std::size_t(k / 2)];
            const bool sampled = sampling && sampling->count(r.id);
            s.add(r, sampled ? sampling->at(r.id) : Sampling{});
        }
        for (const TokenEvent& e : s.step()) {
            if (e.token >= 0) out[e.request].push_back(e.token);
            if (e.finished != FinishReason::none && reasons) (*reasons)[e.request] = e.finished;
        }
    }
    REQUIRE_MESSAGE(s.idle(), "the scheduler did not finish every request in 10000 steps");
    return out;
}

SchedulerConfig config(int max_seqs, int budget, bool static_batching = false, int speculative_k = 0) {
    SchedulerConfig c;
    c.limits = {max_seqs, budget, static_batching};
    c.max_model_len = 1000;
    c.speculative = {speculative_k, 3, 1};
    return c;
}

}  // namespace

TEST_CASE("serve.scheduler.continuous_equals_alone") {
    for (int budget : {1, 3, 8, 64}) {
        FakeEngine engine(1000);
        ContinuousBatching policy;
        Scheduler s(engine, policy, config(4, budget));
        const auto rs = random_requests(12, 1);
        const auto got = run_all(s, rs);
        for (const auto& r : rs) {
            INFO("budget " << budget << ", request " << r.id << ": its tokens in a batch must be "
                 "those it gets alone (a wrong token fed, or fed twice, changes the hash)");
            CHECK(got.at(r.id) == alone(r.prompt, r.max_tokens));
        }
    }
}

TEST_CASE("serve.scheduler.limits_and_decode_first") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(3, 5));
    run_all(s, random_requests(10, 2));
    for (std::size_t k = 0; k < engine.steps.size(); k++) {
        const auto& items = engine.steps[k];
        int tokens = 0;
        for (int n : items) tokens += n;
        INFO("step " << k << ": " << items.size() << " items, " << tokens << " tokens");
        CHECK(tokens <= 5);
        CHECK(items.size() <= 3);
    }
    // Two streams decoding, then a 10-token prompt under a budget of 4: two
    // decode rows and a 2-token chunk, decode rows first.
    FakeEngine e2(1000);
    Scheduler s2(e2, policy, config(3, 4));
    s2.add({1, {1, 2}, 20, {}});
    s2.add({2, {3, 4}, 20, {}});
    s2.step();  // both prompts (2 + 2 tokens)
    s2.add({3, std::vector<int>(10, 7), 5, {}});
    s2.step();
    CHECK(e2.steps.back() == std::vector<int>{1, 1, 2});
    CHECK(s2.last_step().decode_rows == 2);
    CHECK(s2.last_step().prefill_tokens == 2);
    // A 5-token prompt alone under a budget of 4 leaves one token: the next
    // step's single row is still prefill (the prompt's end), and only the
    // step after it decodes.
    FakeEngine e3(1000);
    Scheduler s3(e3, policy, config(1, 4));
    s3.add({1, {1, 2, 3, 4, 5}, 3, {}});
    s3.step();
    s3.step();
    CHECK(e3.steps.back() == std::vector<int>{1});
    CHECK_MESSAGE(s3.last_step().decode_rows == 0, "the prompt's last token is not a decode row");
    CHECK(s3.last_step().prefill_tokens == 1);
    CHECK(s3.last_step().prefill_items == 1);
    s3.step();
    CHECK(s3.last_step().decode_rows == 1);
    CHECK(s3.last_step().prefill_tokens == 0);
}

TEST_CASE("serve.scheduler.static_batching_waits_for_the_batch") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(2, 64, true));
    s.add({1, {1}, 1, {}});   // finishes in its first step
    s.add({2, {2}, 6, {}});   // runs 6 steps
    s.add({3, {3}, 1, {}});
    int steps_until_3 = 0;
    bool done3 = false;
    while (!done3) {
        for (const auto& e : s.step()) done3 = done3 || (e.request == 3 && e.finished != FinishReason::none);
        steps_until_3++;
        REQUIRE(steps_until_3 < 50);
    }
    CHECK_MESSAGE(steps_until_3 == 7, "static: request 3 starts only after request 2's 6 steps");
    FakeEngine e2(1000);
    Scheduler c(e2, policy, config(2, 64, false));
    c.add({1, {1}, 1, {}});
    c.add({2, {2}, 6, {}});
    c.add({3, {3}, 1, {}});
    c.step();
    bool early = false;
    for (const auto& e : c.step()) early = early || (e.request == 3 && e.finished != FinishReason::none);
    CHECK_MESSAGE(early, "continuous: request 3 takes request 1's place at the next step");
}

TEST_CASE("serve.scheduler.preemption_recomputes") {
    // 12 blocks of 4 positions: 48 positions for 4 sequences of up to 20 + 12 tokens.
    FakeEngine engine(12);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(4, 16));
    const auto rs = random_requests(12, 3);
    int preempted = 0;
    std::map<int, std::vector<int>> got;
    for (int k = 0; k < 5000 && (k < 24 || !s.idle()); k++) {
        if (k % 2 == 0 && k / 2 < 12) s.add(rs[std::size_t(k / 2)]);
        for (const auto& e : s.step()) got[e.request].push_back(e.token);
        preempted += s.last_step().preempted;
    }
    REQUIRE(s.idle());
    INFO(preempted << " preemptions");
    CHECK_MESSAGE(preempted > 0, "the trace was meant to run out of blocks");
    CHECK(engine.free_blocks() == 12);
    for (const auto& r : rs) {
        INFO("request " << r.id << ": a preempted sequence recomputes prompt AND output");
        CHECK(got.at(r.id) == alone(r.prompt, r.max_tokens));
    }
}

TEST_CASE("serve.scheduler.cancel") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(1, 64));
    s.add({1, {1, 2, 3}, 50, {}});
    s.add({2, {4}, 50, {}});
    s.step();
    s.step();
    CHECK(s.cancel(1));
    CHECK(s.cancel(2));  // still waiting: max_seqs is 1
    CHECK_FALSE(s.cancel(7));
    std::vector<int> cancelled;
    for (const auto& e : s.step())
        if (e.finished == FinishReason::cancelled) cancelled.push_back(e.request);
    CHECK(cancelled == std::vector<int>{2, 1});
    CHECK(s.idle());
    CHECK_MESSAGE(engine.free_blocks() == 1000, "a cancelled sequence's blocks are freed at once");
}

TEST_CASE("serve.scheduler.stop_conditions") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    const std::vector<int> prompt = {5, 6, 7};
    const auto free_run = alone(prompt, 30);
    SUBCASE("eos") {
        SchedulerConfig c = config(2, 64);
        c.eos_ids = {free_run[4]};
        Scheduler s(engine, policy, c);
        std::map<int, FinishReason> why;
        const auto got = run_all(s, {{1, prompt, 30, {}}}, &why);
        CHECK(got.at(1) == alone(prompt, 30, c.eos_ids));
        CHECK(why.at(1) == FinishReason::eos);
        c.ignore_eos = true;
        Scheduler t(engine, policy, c);
        CHECK(run_all(t, {{1, prompt, 30, {}}}).at(1) == free_run);
    }
    SUBCASE("max_tokens and context") {
        SchedulerConfig c = config(2, 64);
        c.max_model_len = 8;  // 3 prompt tokens: outputs 1..5 fit, the 5th ends it
        Scheduler s(engine, policy, c);
        std::map<int, FinishReason> why;
        const auto got = run_all(s, {{1, prompt, 30, {}}, {2, prompt, 2, {}}}, &why);
        CHECK(got.at(1).size() == 6);
        CHECK(got.at(2).size() == 2);
        CHECK(why.at(1) == FinishReason::length);
        CHECK(why.at(2) == FinishReason::length);
    }
    SUBCASE("stop string") {
        // With the byte tokenizer token t is the character t: the stop string is
        // outputs 2 and 3, so the text ends after outputs 0 and 1 and output 3
        // is the last token generated.
        SchedulerConfig c = config(2, 64);
        c.tokenizer = pd::Tokenizer::bytes(kVocab);
        const std::string stop = {char(free_run[2]), char(free_run[3])};
        const std::string before = {char(free_run[0]), char(free_run[1])};
        REQUIRE((before + stop).find(stop) == 2);  // no earlier match
        Scheduler s(engine, policy, c);
        std::string text;
        FinishReason why = FinishReason::none;
        s.add({1, prompt, 30, {stop}});
        while (!s.idle())
            for (const TokenEvent& e : s.step()) {
                text += e.text;
                why = e.finished;
            }
        INFO("stop string \"" << stop << "\"");
        CHECK(why == FinishReason::stop_string);
        CHECK_MESSAGE(text == before, "the client sees the text before the stop string, and no part of it");
    }
    SUBCASE("the text held back is sent at the end") {
        // A stop string that starts with output 1 but never completes: output 1
        // is held back from its token's event and sent with the last token's.
        SchedulerConfig c = config(2, 64);
        c.tokenizer = pd::Tokenizer::bytes(kVocab);
        const std::string stop = {char(free_run[1]), char(kVocab)};  // character kVocab is never generated
        REQUIRE(free_run[0] != free_run[1]);  // output 0 is not held back
        Scheduler s(engine, policy, c);
        std::vector<std::string> texts;
        FinishReason why = FinishReason::none;
        s.add({1, prompt, 2, {stop}});
        while (!s.idle())
            for (const TokenEvent& e : s.step()) {
                texts.push_back(e.text);
                why = e.finished;
            }
        REQUIRE(texts.size() == 2);
        CHECK(why == FinishReason::length);
        CHECK(texts[0] == std::string(1, char(free_run[0])));
        CHECK_MESSAGE(texts[1] == std::string(1, char(free_run[1])), "held back until max_tokens ended it");
    }
}

namespace {

// What a request sampled with `sc` yields alone on the fake model, drawn with
// the engine's sampler over the fake's logits (1 for its next token, 0 elsewhere).
std::vector<int> sampled_alone(std::vector<int> tokens, int max_tokens, const pd::SamplerConfig& sc) {
    pd::Sampler sampler = pd::make_sampler(sc, kVocab);
    std::vector<float> logits(kVocab);
    std::vector<int> out;
    while (int(out.size()) < max_tokens) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        logits[std::size_t(next_token(tokens))] = 1.0f;
        out.push_back(pd::sample(sampler, logits.data(), kVocab));
        tokens.push_back(out.back());
    }
    return out;
}

}  // namespace

TEST_CASE("serve.scheduler.per_request_sampling") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(3, 8));
    const std::vector<int> prompt = {4, 8, 15};
    const pd::SamplerConfig hot{1.0f, 0, 1.0f, pd::test::seed_for(7)}, nucleus{0.7f, 0, 0.5f, pd::test::seed_for(8)};
    const std::vector<Request> rs = {{1, prompt, 20, {}}, {2, prompt, 20, {}}, {3, prompt, 20, {}}, {4, {1, 2}, 9, {}}};
    const std::map<int, Sampling> sampling = {{1, {hot}}, {3, {nucleus}}, {4, {hot}}};  // 2: greedy
    const auto got = run_all(s, rs, nullptr, &sampling);
    INFO("each request draws from its own sampler (temperature, top_p, seed), whoever shares its steps");
    CHECK(got.at(1) == sampled_alone(prompt, 20, hot));
    CHECK_MESSAGE(got.at(2) == alone(prompt, 20), "a request without a sampler config stays greedy");
    CHECK(got.at(3) == sampled_alone(prompt, 20, nucleus));
    CHECK(got.at(4) == sampled_alone({1, 2}, 9, hot));
    CHECK_MESSAGE(got.at(1) != got.at(2), "temperature 1 over 50 near-equal logits should leave the greedy path");
}

// A checkpoint lists several EOS ids (Llama 3.1: 128001, 128008, 128009): a
// request stops at whichever comes first, as "stop", the 2nd or 3rd of the list too.
TEST_CASE("serve.scheduler.stops_at_any_eos_id") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    const std::vector<int> prompt = {5, 6, 7};
    const auto free_run = alone(prompt, 30);
    for (std::size_t p : {2, 4, 6})
        for (const std::vector<int>& eos : pd::test::eos_lists_hitting(free_run, p)) {
            INFO("EOS ids " << eos[0] << ", " << eos[1] << ", " << eos[2] << "; output " << p << " is "
                 << free_run[p]);
            SchedulerConfig c = config(2, 64);
            c.eos_ids = eos;
            Scheduler s(engine, policy, c);
            std::map<int, FinishReason> why;
            const auto got = run_all(s, {{1, prompt, 30, {}}}, &why);
            CHECK(got.at(1) == pd::test::until_first(free_run, p));
            CHECK(why.at(1) == FinishReason::eos);
            CHECK(std::string(finish_reason_name(why.at(1))) == "stop");
        }
}

TEST_CASE("serve.scheduler.per_request_ignore_eos") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    const std::vector<int> prompt = {5, 6, 7};
    const auto free_run = alone(prompt, 12);
    SchedulerConfig c = config(2, 64);
    c.eos_ids = {free_run[3]};
    Scheduler s(engine, policy, c);
    const std::map<int, Sampling> sampling = {{2, {{}, true}}};  // 2 ignores EOS, 1 does not
    const auto got = run_all(s, {{1, prompt, 12, {}}, {2, prompt, 12, {}}}, nullptr, &sampling);
    CHECK_MESSAGE(got.at(1) == alone(prompt, 12, c.eos_ids), "a request that keeps EOS stops there");
    CHECK_MESSAGE(got.at(2) == free_run, "a request with ignore_eos runs to max_tokens, the other's EOS aside");
}

TEST_CASE("serve.scheduler.bad_input") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    CHECK_THROWS_AS(Scheduler(engine, policy, config(1, 0)), pd::UserError);
    CHECK_THROWS_AS(Scheduler(engine, policy, config(0, 8)), pd::UserError);
    Scheduler s(engine, policy, config(2, 8));
    CHECK_THROWS_AS(s.add({1, std::vector<int>(1001, 1), 4, {}}), pd::UserError);
    CHECK_THROWS_AS(s.add({1, {}, 4, {}}), pd::UserError);
    CHECK_THROWS_AS(s.add({1, {1}, 0, {}}), pd::UserError);
    CHECK_THROWS_AS(s.add({1, {1}, 4, {"x"}}), pd::UserError);  // no tokenizer
    s.add({1, {1}, 4, {}});
    CHECK_THROWS_AS(s.add({1, {2}, 4, {}}), pd::UserError);
    FakeEngine tiny(2);  // 8 positions: a 9-token request never fits
    Scheduler t(tiny, policy, config(2, 64));
    t.add({1, std::vector<int>(9, 1), 4, {}});
    CHECK_THROWS_AS(t.step(), pd::UserError);
}

TEST_CASE("serve.scheduler.steady_state_allocates_nothing") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(4, 16));
    for (int i = 0; i < 4; i++) s.add({i, {1, 2, 3, i}, 200, {}});
    for (int k = 0; k < 3; k++) s.step();  // prefill, the first decode steps
    engine.recording = false;  // the fake's record of each step would allocate
    const long long before = g_allocations.load();
    for (int k = 0; k < 50; k++) s.step();
    CHECK_MESSAGE(g_allocations.load() - before == 0,
                  "the scheduler allocated during steady-state decode steps");
    CHECK(s.running() == 4);
}

// ---- Speculative decoding: n-gram proposals checked in the decode row's item ----

namespace {

// Requests like random_requests' with longer outputs (3 to 36 tokens).
std::vector<Request> longer_requests(int n, std::uint64_t seed) {
    auto rs = random_requests(n, seed);
    for (Request& r : rs) r.max_tokens *= 3;
    return rs;
}

struct SpecRun {
    std::map<int, std::vector<int>> tokens;  // by request
    std::size_t steps = 0;                   // engine steps
    int preemptions = 0;
    SpeculationStats spec;
};

// Runs `rs` as run_all does (4 sequences) with k proposed tokens on the fake
// of `window`; every block must be back at the end.
SpecRun run_spec(const std::vector<Request>& rs, int k, int window, int budget, int blocks = 1000) {
    FakeEngine engine(blocks, 4, window);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(4, budget, false, k));
    SpecRun r;
    r.tokens = run_all(s, rs);
    r.steps = engine.steps.size();
    r.preemptions = engine.opens - int(rs.size());
    r.spec = s.speculation();
    CHECK_MESSAGE(engine.free_blocks() == blocks, "the blocks of rejected rows must go back to the pool");
    return r;
}

}  // namespace

TEST_CASE("serve.scheduler.speculative_equals_plain") {
    const auto rs = longer_requests(12, 4);
    // window 0: every token hashes the whole history, so proposals are nearly
    // always wrong and every rejected row must be rolled back exactly;
    // window 1: outputs loop, proposals are mostly right.
    for (const int window : {0, 1})
        for (const int budget : {1, 3, 8, 64}) {
            const SpecRun got = run_spec(rs, 4, window, budget);
            INFO("window " << window << ", budget " << budget << ": " << got.spec.proposed << " proposed, "
                 << got.spec.accepted << " accepted");
            if (budget > 4) CHECK_MESSAGE(got.spec.proposed > 0, "a budget past the decode rows leaves room for proposals");
            for (const auto& r : rs) {
                INFO("request " << r.id << ": speculation must give greedy decoding's tokens");
                CHECK(got.tokens.at(r.id) == alone(r.prompt, r.max_tokens, {}, window));
            }
        }
    // Outputs that loop: most proposals kept, fewer steps than without.
    const SpecRun plain = run_spec(rs, 0, 1, 64), spec = run_spec(rs, 4, 1, 64);
    INFO(spec.steps << " steps with speculation against " << plain.steps << " without; acceptance "
         << spec.spec.acceptance_rate() << ", " << spec.spec.tokens_per_verify() << " tokens per verify");
    CHECK(plain.spec.proposed == 0);
    CHECK(spec.spec.acceptance_rate() > 0.5);
    CHECK(spec.spec.tokens_per_verify() > 2.0);
    CHECK(spec.steps < plain.steps * 3 / 4);
}

TEST_CASE("serve.scheduler.speculative_preemption") {
    // 16 blocks of 4 positions for 4 sequences of up to 20 + 36 tokens.
    const auto rs = longer_requests(12, 5);
    for (const int window : {0, 1}) {
        const SpecRun got = run_spec(rs, 4, window, 16, 16);
        INFO("window " << window << ": " << got.preemptions << " preemptions, " << got.spec.accepted << " accepted");
        CHECK_MESSAGE(got.preemptions > 0, "the trace was meant to run out of blocks");
        if (window == 1) CHECK(got.spec.accepted > 0);
        for (const auto& r : rs) {
            INFO("request " << r.id);
            CHECK(got.tokens.at(r.id) == alone(r.prompt, r.max_tokens, {}, window));
        }
    }
}

TEST_CASE("serve.scheduler.speculative_counts_every_row") {
    FakeEngine engine(1000, 4, 1);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(3, 9, false, 4));
    const auto rs = longer_requests(8, 6);
    long long verify_rows = 0, accepted = 0;
    for (int k = 0; k < 2000 && (k < 16 || !s.idle()); k++) {
        if (k % 2 == 0 && k / 2 < int(rs.size())) s.add(rs[std::size_t(k / 2)]);
        s.step();
        if (engine.steps.empty()) continue;
        int engine_rows = 0, batch_rows = 0, proposed = 0;
        for (int n : engine.steps.back()) engine_rows += n;
        for (const StepItem& it : s.last_batch()) {
            batch_rows += it.tokens, proposed += it.proposed, accepted += it.accepted;
            CHECK(it.accepted <= it.proposed);
            if (it.proposed > 0) CHECK_MESSAGE(it.decode, "only a decode row carries proposed tokens");
        }
        const StepCounts& c = s.last_step();
        INFO("step " << k);
        CHECK(engine_rows == c.decode_rows + c.speculative_rows + c.prefill_tokens);
        CHECK(batch_rows == engine_rows);
        CHECK(proposed == c.speculative_rows);
        CHECK(engine_rows <= 9);
        verify_rows += c.speculative_rows;
    }
    REQUIRE(s.idle());
    CHECK(verify_rows == s.speculation().proposed);
    CHECK(accepted == s.speculation().accepted);
    CHECK(accepted > 0);
}

TEST_CASE("serve.scheduler.speculative_stops_inside_a_run") {
    // window 1: the outputs loop, so runs of proposed tokens are kept, and a
    // finish rule met inside one must cut it there.
    FakeEngine engine(1000, 4, 1);
    ContinuousBatching policy;
    const std::vector<int> prompt = {5, 6, 7};
    const auto free_run = alone(prompt, 40, {}, 1);
    SUBCASE("max_tokens") {
        long long accepted = 0;
        for (int m = 1; m <= 30; m++) {
            Scheduler s(engine, policy, config(2, 64, false, 4));
            const auto got = run_all(s, {{1, prompt, m, {}}});
            INFO("max_tokens " << m);
            CHECK(got.at(1) == std::vector<int>(free_run.begin(), free_run.begin() + m));
            accepted += s.speculation().accepted;
        }
        CHECK(accepted > 0);
    }
    SUBCASE("eos") {
        for (int p = 3; p < 20; p++) {
            SchedulerConfig c = config(2, 64, false, 4);
            c.eos_ids = {free_run[std::size_t(p)]};
            Scheduler s(engine, policy, c);
            std::map<int, FinishReason> why;
            const auto got = run_all(s, {{1, prompt, 40, {}}}, &why);
            INFO("EOS = output " << p << " (" << c.eos_ids[0] << ")");
            CHECK(got.at(1) == alone(prompt, 40, c.eos_ids, 1));
            CHECK(why.at(1) == FinishReason::eos);
        }
    }
    SUBCASE("stop string") {
        // Token t is the character t (byte tokenizer); each stop string is two
        // consecutive outputs: the text ends just before its first occurrence.
        std::string text_of_run;
        for (int t : free_run) text_of_run += char(t);
        for (int p = 3; p < 20; p++) {
            SchedulerConfig c = config(2, 64, false, 4);
            c.tokenizer = pd::Tokenizer::bytes(kVocab);
            const std::string stop = text_of_run.substr(std::size_t(p), 2);
            const std::size_t at = text_of_run.find(stop);
            Scheduler s(engine, policy, c);
            s.add({1, prompt, 40, {stop}});
            std::string text;
            int tokens = 0;
            FinishReason why = FinishReason::none;
            while (!s.idle())
                for (const TokenEvent& e : s.step()) text += e.text, tokens++, why = e.finished;
            INFO("stop string of outputs " << p << " and " << p + 1 << ", first at " << at);
            CHECK(why == FinishReason::stop_string);
            CHECK(text == text_of_run.substr(0, at));
            CHECK_MESSAGE(tokens == int(at) + 2, "no token past the one that completes the stop string");
        }
    }
}

TEST_CASE("serve.scheduler.speculative_bad_input") {
    FakeEngine engine(1000);
    ContinuousBatching policy;
    SchedulerConfig bad = config(2, 8, false, -1);
    CHECK_THROWS_AS(Scheduler(engine, policy, bad), pd::UserError);
    bad = config(2, 8, false, 4);
    bad.speculative.min_n = 0;
    CHECK_THROWS_AS(Scheduler(engine, policy, bad), pd::UserError);
    Scheduler s(engine, policy, config(2, 8, false, 4));
    const pd::SamplerConfig hot{0.8f, 0, 1.0f, 1};
    CHECK_THROWS_WITH_AS(s.add({1, {1, 2}, 4, {}}, {hot}), doctest::Contains("temperature"), pd::UserError);
    CHECK_NOTHROW(s.add({1, {1, 2}, 4, {}}));  // greedy: fine
}

TEST_CASE("serve.scheduler.speculative_steady_state_allocates_nothing") {
    FakeEngine engine(1000, 4, 1);
    ContinuousBatching policy;
    Scheduler s(engine, policy, config(4, 32, false, 4));
    for (int i = 0; i < 4; i++) s.add({i, {1, 2, 3, i}, 900, {}});
    for (int k = 0; k < 3; k++) s.step();
    engine.recording = false;
    const long long before = g_allocations.load();
    for (int k = 0; k < 50; k++) s.step();
    CHECK_MESSAGE(g_allocations.load() - before == 0, "the scheduler allocated during speculative decode steps");
    CHECK(s.running() == 4);
    CHECK(s.speculation().accepted > 0);
}

TEST_CASE("serve.scheduler.tiny_model_continuous_equals_alone") {
    auto lm = pd::load_model("tiny", pd::Precision::f32, false);
    const char* texts[] = {"Once upon a time", "The little dog", "Lily wanted to", "One day, a boy named Tom",
                           "The sun was"};
    std::vector<Request> rs;
    for (int i = 0; i < 5; i++) rs.push_back({i, lm.tokenizer.encode(texts[i]), 6 + 3 * i, {}});
    auto engine = pd::make_engine(lm.model, {pd::Device::cpu, 3, 64});
    SlotServingEngine serving(*engine);
    ContinuousBatching policy;
    SchedulerConfig c = config(3, 7);  // 7 tokens a step: prompts arrive in chunks
    c.max_model_len = 64;
    c.ignore_eos = true;
    Scheduler s(serving, policy, c);
    const auto got = run_all(s, rs);
    auto single = pd::make_engine(lm.model, {pd::Device::cpu, 1, 64});
    for (const auto& r : rs) {
        pd::GenerateOptions o;
        o.max_new_tokens = r.max_tokens;
        o.stop_at_eos = false;
        single->reset(0);
        INFO("request " << r.id << " (\"" << texts[r.id] << "\"): greedy ids batched, chunked and "
             "alone must agree");
        CHECK(got.at(r.id) == pd::generate(*single, r.prompt, o).generated_ids);
    }
}

namespace {

// Six requests on the tiny model sharing a 12-token prefix (3 blocks of 4):
// longer prompts, the prefix alone (a full-prefix hit still computes its last
// token) and 10 of its tokens (a hit that ends mid-block reuses 2 blocks).
std::vector<Request> shared_prefix_requests(const pd::Tokenizer& tok) {
    std::vector<int> prefix = tok.encode("Once upon a time, there was a little girl named Lily. She loved");
    REQUIRE_MESSAGE(prefix.size() >= 12, "the shared text should encode to at least 12 tokens");
    prefix.resize(12);
    const char* tails[] = {" to play outside", " her red ball", "", " the big tree", "", " cake"};
    std::vector<Request> rs;
    for (int i = 0; i < 6; i++) {
        Request r{i, prefix, 8 + 2 * i, {}};
        const auto tail = tok.encode(tails[i]);
        r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
        if (i == 4) r.prompt.resize(10);
        rs.push_back(r);
    }
    return rs;
}

// Runs `rs` through a scheduler (3 sequences, 7 tokens a step) over
// `engine`, proposing `speculative_k` tokens a decode row; `stats`: its speculation.
std::map<int, std::vector<int>> run_tiny(ServingEngine& engine, const std::vector<Request>& rs,
                                         int speculative_k = 0, SpeculationStats* stats = nullptr) {
    ContinuousBatching policy;
    SchedulerConfig c = config(3, 7, false, speculative_k);
    c.max_model_len = 64;
    c.ignore_eos = true;
    Scheduler s(engine, policy, c);
    auto out = run_all(s, rs);
    if (stats) *stats = s.speculation();
    return out;
}

}  // namespace

TEST_CASE("serve.scheduler.tiny_model_paged_equals_slot") {
    auto lm = pd::load_model("tiny", pd::Precision::f32, false);
    const auto rs = shared_prefix_requests(lm.tokenizer);
    auto engine = pd::make_engine(lm.model, {pd::Device::cpu, 3, 64});
    SlotServingEngine slot(*engine, 4);
    const auto want = run_tiny(slot, rs);
    // Speculating (3 proposed tokens a decode row), the slot engine's verify
    // items are prefills that keep every row's logits.
    SpeculationStats st;
    const auto slot_spec = run_tiny(slot, rs, 3, &st);
    CHECK(st.proposed > 0);
    for (const auto& r : rs) {
        INFO("request " << r.id << ": speculation on the slot engine must give greedy decoding's ids");
        CHECK(slot_spec.at(r.id) == want.at(r.id));
    }
    // Plenty of blocks, then 12: three sequences of up to 28 positions need up to 21.
    for (const int blocks : {64, 12})
        for (const int speculative_k : {0, 3}) {
            auto paged = make_paged_serving_engine(lm.model, {4, blocks, 0, 0, true});
            CountingServingEngine counted(*paged);
            const auto got = run_tiny(counted, rs, speculative_k, &st);
            const KvCounters& k = counted.counters();
            INFO(blocks << " blocks of 4, " << speculative_k << " proposed tokens a row: " << k.skipped_tokens
                 << " of " << k.prompt_tokens << " prompt tokens found in the prefix cache, "
                 << k.opens - long(rs.size()) << " preemptions, " << st.proposed << " proposed, " << st.accepted
                 << " accepted");
            CHECK_MESSAGE(k.skipped_tokens > 0, "requests sharing a 12-token prefix should hit the prefix cache");
            if (blocks == 12) CHECK_MESSAGE(k.opens > long(rs.size()), "12 blocks were meant to force a preemption");
            if (speculative_k > 0) CHECK(st.proposed > 0);
            CHECK_MESSAGE(paged->free_blocks() == blocks, "every block should be free (or parked) at the end, "
                          "the rows of rejected proposals' too");
            for (const auto& r : rs) {
                INFO("request " << r.id << " (" << r.prompt.size() << " prompt tokens): the paged engine, with "
                     "shared prefix blocks, recompute after preemption and speculation, must give the slot "
                     "engine's greedy ids");
                CHECK(got.at(r.id) == want.at(r.id));
            }
        }
}

TEST_CASE("serve.scheduler.tiny_model_speculation_saves_steps") {
    // Past its end of text the tiny model tells its greedy story again, almost
    // word for word: there the n-gram proposals are mostly kept and the steps fall.
    auto lm = pd::load_model("tiny", pd::Precision::f32, false);
    std::vector<Request> rs;
    for (const char* text : {"Once upon a time", "The little dog"}) rs.push_back({int(rs.size()), lm.tokenizer.encode(text), 220, {}});
    auto steps = [&](int k, std::map<int, std::vector<int>>& out, SpeculationStats& st) {
        auto paged = make_paged_serving_engine(lm.model, {16, 32, 0, 0, true});
        ContinuousBatching policy;
        SchedulerConfig c = config(2, 64, false, k);
        c.max_model_len = 256;
        c.ignore_eos = true;
        Scheduler s(*paged, policy, c);
        int n = 0;
        for (const Request& r : rs) s.add(r);
        for (; !s.idle() && n < 1000; n++)
            for (const TokenEvent& e : s.step()) out[e.request].push_back(e.token);
        st = s.speculation();
        return n;
    };
    std::map<int, std::vector<int>> plain, spec;
    SpeculationStats none, st;
    const int plain_steps = steps(0, plain, none), spec_steps = steps(4, spec, st);
    INFO(spec_steps << " steps with 4 proposed tokens a row against " << plain_steps << " without; acceptance "
         << st.acceptance_rate() << ", " << st.tokens_per_verify() << " tokens per verify");
    CHECK(spec == plain);
    CHECK(spec_steps < plain_steps * 3 / 4);
}

TEST_CASE("serve.scheduler.arrival_times_reach_the_policy") {
    // A replay on a virtual clock of 1 s a step: each request's SeqState
    // carries its trace arrival (after a preemption too), and now_s is the
    // replay's time when the step being decided began.
    struct Watcher final : StepPolicy {
        ContinuousBatching inner;
        const double* now_s = nullptr;
        std::map<int, double> arrival;  // by sequence id (reused once finished): what admit saw last
        std::set<double> arrivals;      // every arrival admit saw
        std::vector<double> nows;       // now_s at each build_batch
        void retire(const SchedulerState& s, std::vector<int>& out) override { inner.retire(s, out); }
        void admit(const SchedulerState& s, const StepLimits& lim, std::vector<int>& out) override {
            for (int id : s.waiting) arrival[id] = s.seqs[std::size_t(id)].arrival_s, arrivals.insert(arrival[id]);
            inner.admit(s, lim, out);
        }
        void build_batch(const SchedulerState& s, const StepLimits& lim, std::vector<pd::serve::BatchItem>& out) override {
            nows.push_back(*now_s);
            for (int id : s.running) CHECK(s.seqs[std::size_t(id)].arrival_s == arrival.at(id));
            inner.build_batch(s, lim, out);
        }
    };
    FakeEngine engine(1000);
    Watcher policy;
    double now = -1;
    policy.now_s = &now;
    Scheduler s(engine, policy, config(1, 64));
    Trace trace(3);
    trace[0].arrival_s = 0.5, trace[1].arrival_s = 0.75, trace[2].arrival_s = 10;
    std::vector<Request> rs = {{0, {1, 2}, 2, {}}, {1, {3}, 2, {}}, {2, {4}, 1, {}}};
    replay(s, trace, rs, false, "", [](const Scheduler&) { return 1.0; }, &now);
    // One sequence at a time: request 0 runs at 0.5 and 1.5, request 1 at 2.5
    // and 3.5; idle, the clock jumps to request 2's arrival.
    CHECK(policy.nows == std::vector<double>{0.5, 1.5, 2.5, 3.5, 10});
    CHECK(policy.arrivals == std::set<double>{0.5, 0.75, 10});
}
