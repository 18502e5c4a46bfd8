// Lab 08 tests: your planner against its rules restated here, on hand-worked
// and seeded random scheduler states; then inside the kit's real Scheduler,
// first on a fake engine whose next token hashes each sequence's whole cached
// history (a chunk fed twice, skipped or to the wrong sequence changes every
// later token), then on the real paged engine with the bundled model: a prompt
// prefilled in chunks gives the logits of one pass, and the same greedy ids.
//   meson test -C build --suite track2-08        (all of them)
//   build/labs/track2/08-chunked-prefill/lab08_tests --test-case='lab08.rules.*'
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "batch_rules.hpp"
#include "common.hpp"
#include "engine/sampler.hpp"
#include "exercise.hpp"
#include "load/model_source.hpp"
#include "hash_engine.hpp"
#include "lab_test.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/scheduler.hpp"
#include "show.hpp"

using namespace pd::lab08;
using pd::lab::alone;
using pd::lab::expected_batch;  // the rules, restated (README "The planner"): labs/common/batch_rules.hpp
using pd::lab::flat;
using pd::lab::HashEngine;
using pd::lab::Inputs;
using pd::lab::kHashVocab;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::lab::show;
using pd::serve::Request;
using pd::serve::Scheduler;

namespace {

// A scheduler state: the planner sees only `running`.
struct World {
    std::vector<SeqState> seqs;
    std::vector<int> running;
    SchedulerState view() const { return {seqs, {}, running}; }
};

// Random running sequences under shuffled ids: about half decode (one token
// left), the rest are somewhere in their prefill (1..tokens left).
World random_world(Inputs& in) {
    World w;
    const int n = in.integer(0, 20);
    w.running.resize(std::size_t(n));
    std::iota(w.running.begin(), w.running.end(), 0);
    for (int k = n - 1; k > 0; k--) std::swap(w.running[std::size_t(k)], w.running[std::size_t(in.integer(0, k))]);
    w.seqs.resize(std::size_t(n));
    for (SeqState& q : w.seqs) {
        q.tokens = in.integer(1, 300);
        q.computed = in.integer(0, 1) ? q.tokens - 1 : in.integer(0, q.tokens - 1);
    }
    return w;
}

std::vector<BatchItem> plan(const World& w, int budget) {
    std::vector<BatchItem> out;
    out.reserve(w.seqs.size());
    plan_step(w.view(), budget, out);
    return out;
}

int tokens_of(const std::vector<BatchItem>& v) {
    return std::accumulate(v.begin(), v.end(), 0, [](int a, const BatchItem& b) { return a + b.n; });
}

void needs_planner() {
    pd::lab::needs([] { plan(World{}, 1); });
}

}  // namespace

TEST_CASE("lab08.rules.decode_first_then_the_oldest_prompt") {
    needs_planner();
    // Running, oldest first: 0 has 10 prompt tokens to go, 1 decodes, 2 has 10 to go, 3 decodes.
    World w;
    w.seqs = {{10, 0, false}, {8, 7, false}, {12, 2, false}, {4, 3, false}};
    w.running = {0, 1, 2, 3};
    const auto got = plan(w, 8);
    observe("budget 8", flat(got));
    CHECK_MESSAGE((flat(got) == std::vector<int>{1, 1, 3, 1, 0, 6}),
                  "both decode rows (seq 1, seq 3) before any prefill, then the OLDEST prompt (seq 0) gets the 6 "
                  "tokens left; seq 2 waits; yours "
                      << show(got));
    const auto wide = plan(w, 40);
    observe("budget 40", flat(wide));
    CHECK_MESSAGE((flat(wide) == std::vector<int>{1, 1, 3, 1, 0, 10, 2, 10}),
                  "a wide budget: both decode rows, then each prompt's whole rest, oldest first; yours " << show(wide));
}

TEST_CASE("lab08.rules.random_states") {
    needs_planner();
    Inputs in(1);
    for (int trial = 0; trial < 400; trial++) {
        const World w = random_world(in);
        const int budget = in.integer(1, 600);
        const auto got = plan(w, budget);
        observe("trial " + std::to_string(trial), flat(got));
        INFO("budget " << budget << ", running " << w.running.size() << " sequences");
        INFO("yours    " << show(got));
        CHECK_MESSAGE(tokens_of(got) <= budget, "the items must never add up to more than the budget");
        const std::vector<BatchItem> want = expected_batch(w.view(), budget);
        CHECK_MESSAGE(flat(got) == flat(want),
                      "expected " << show(want)
                                  << ": decode rows first (one token each), then prefill chunks, both in running "
                                     "order, within the budget");
    }
}

TEST_CASE("lab08.budget.below_one_token_is_rejected") {
    needs_planner();
    World w;
    w.seqs = {{6, 0, false}, {5, 4, false}};
    w.running = {0, 1};
    for (int budget : {0, -3}) {
        INFO("budget " << budget);
        std::vector<BatchItem> out;
        out.reserve(2);
        CHECK_THROWS_AS(plan_step(w.view(), budget, out), pd::UserError);
        CHECK_THROWS_WITH(plan_step(w.view(), budget, out), doctest::Contains(std::to_string(budget).c_str()));
    }
    const auto one = plan(w, 1);
    observe("budget 1", flat(one));
    CHECK_MESSAGE((flat(one) == std::vector<int>{1, 1}), "a budget of 1: the decode row only; yours " << show(one));
    w.seqs[1] = {5, 0, false};  // no decode row left: one token of the oldest prompt
    const auto first = plan(w, 1);
    observe("budget 1, prompts only", flat(first));
    CHECK_MESSAGE((flat(first) == std::vector<int>{0, 1}), "a budget of 1 and two prompts: one token of the older; yours "
                                                            << show(first));
}


TEST_CASE("lab08.chunks.hand_worked_prompt_among_three_streams") {
    needs_planner();
    // Three streams decode; a 100-token prompt arrives. Budget 16: the streams
    // take 3 a step, the prompt 13, so it runs in chunks 13 x 7 + 9 over 8
    // steps while every stream gets its token every step.
    HashEngine engine;
    StudentPlanner planner;
    Scheduler s(engine, planner, {{4, 16, false}, 1000, -1, true, std::nullopt});
    for (int i = 0; i < 3; i++) s.add({i, {1 + i, 2, 3}, 40, {}});
    s.step();  // the three 3-token prompts in one step (9 tokens)
    std::vector<int> prompt(100);
    std::iota(prompt.begin(), prompt.end(), 0);
    for (int& t : prompt) t %= kHashVocab;
    s.add({3, prompt, 2, {}});
    const std::size_t first = engine.steps.size();
    std::vector<int> chunks;
    int newcomer_first_token_step = -1;
    for (int k = 0; k < 12 && newcomer_first_token_step < 0; k++) {
        for (const auto& e : s.step())
            if (e.request == 3) newcomer_first_token_step = k + 1;
        const auto& items = engine.steps.back();
        int decodes = 0;
        for (const auto& b : items) {
            if (b.seq == 3)
                chunks.push_back(b.n);  // the newcomer is sequence 3: the fourth added
            else
                decodes++;
        }
        CHECK_MESSAGE(decodes == 3, "step " << k + 1 << " after the arrival: every stream must get its token (ran "
                                            << show(items) << ")");
    }
    observe("chunk sizes", chunks);
    observe("steps to the first token", newcomer_first_token_step);
    CHECK_MESSAGE(chunks == (std::vector<int>{13, 13, 13, 13, 13, 13, 13, 9}),
                  "the prompt's chunks: what the budget leaves after three decode rows, until its last 9 tokens");
    CHECK_MESSAGE(newcomer_first_token_step == 8, "the prompt's first token comes with its last chunk, step 8");
    CHECK(engine.steps.size() - first == std::size_t(newcomer_first_token_step));
}

TEST_CASE("lab08.chunks.continue_where_the_last_stopped") {
    needs_planner();
    Inputs in(4);
    for (int round = 0; round < 4; round++) {
        HashEngine engine;
        StudentPlanner planner;
        pd::serve::SchedulerConfig cfg;
        cfg.limits = {in.integer(2, 6), in.integer(1, 40), false};
        cfg.max_model_len = 1000;
        cfg.ignore_eos = true;
        Scheduler s(engine, planner, cfg);
        std::vector<Request> rs;
        for (int i = 0; i < 12; i++) rs.push_back({i, in.tokens(in.integer(1, 120), kHashVocab), in.integer(1, 12), {}});
        std::map<int, std::vector<int>> got;
        for (int k = 0; k < 20000 && (k < 24 || !s.idle()); k++) {
            if (k % 2 == 0 && k / 2 < 12) s.add(rs[std::size_t(k / 2)]);
            for (const auto& e : s.step()) got[e.request].push_back(e.token);
        }
        REQUIRE_MESSAGE(s.idle(), "some request never finished: does every prompt get a chunk when the budget allows?");
        INFO("budget " << cfg.limits.max_tokens_per_step << ", max_seqs " << cfg.limits.max_seqs);
        for (const auto& items : engine.steps)
            CHECK_MESSAGE(tokens_of(items) <= cfg.limits.max_tokens_per_step, "a step ran " << show(items));
        for (const auto& r : rs) {
            observe("round " + std::to_string(round) + " request " + std::to_string(r.id), got[r.id]);
            INFO("request " << r.id << ", prompt of " << r.prompt.size());
            CHECK_MESSAGE(got[r.id] == alone(r.prompt, r.max_tokens),
                          "its tokens must be those it gets alone: each chunk must be the sequence's NEXT tokens");
        }
    }
}

namespace {

const pd::LoadedModel& bundled() {
    static const pd::LoadedModel lm = pd::load_model("tiny", pd::Precision::f32, false);
    return lm;
}

std::unique_ptr<pd::serve::PagedServingEngine> paged_engine() {
    // One thread: on a loaded machine an OpenMP team waits for its slowest member.
    return pd::serve::make_paged_serving_engine(bundled().model, {.block_size = 16, .total_blocks = 256, .threads = 1});
}

// Forwards every call to a real engine and keeps a copy of the logits row of
// every item that asked for one, by sequence, in order.
class LogitsTap final : public pd::serve::ServingEngine {
public:
    explicit LogitsTap(ServingEngine& inner) : inner_(inner) {}
    const pd::Config& config() const override { return inner_.config(); }
    int block_size() const override { return inner_.block_size(); }
    int total_blocks() const override { return inner_.total_blocks(); }
    int free_blocks() const override { return inner_.free_blocks(); }
    int open(int seq, std::span<const int> prompt) override { return inner_.open(seq, prompt); }
    bool reserve(int seq, int len) override { return inner_.reserve(seq, len); }
    void close(int seq) override { inner_.close(seq); }
    int cached_len(int seq) const override { return inner_.cached_len(seq); }
    const float* step(std::span<const pd::serve::SeqWork> work) override {
        const float* l = inner_.step(work);
        const std::size_t V = std::size_t(config().vocab_size);
        std::size_t row = 0;
        for (const auto& w : work)
            if (w.logits) rows[w.seq].emplace_back(l + V * row, l + V * (row + 1)), row++;
        return l;
    }
    std::map<int, std::vector<std::vector<float>>> rows;

private:
    ServingEngine& inner_;
};

// The last prompt token's logits in ONE pass, straight through the engine.
std::vector<float> one_pass_logits(const std::vector<int>& prompt) {
    auto e = paged_engine();
    e->open(0, prompt);
    REQUIRE(e->reserve(0, int(prompt.size())));
    const pd::serve::SeqWork w{0, prompt, true};
    const float* l = e->step({&w, 1});
    return {l, l + e->config().vocab_size};
}

// The same greedy continuation, alone, one pass then one decode at a time.
std::vector<int> one_pass_greedy(std::vector<int> tokens, int n) {
    auto e = paged_engine();
    e->open(0, tokens);
    std::vector<int> out;
    std::span<const int> next(tokens);
    for (int k = 0; k < n; k++) {
        REQUIRE(e->reserve(0, e->cached_len(0) + int(next.size())));
        const pd::serve::SeqWork w{0, next, true};
        out.push_back(pd::argmax(e->step({&w, 1}), e->config().vocab_size));
        tokens.push_back(out.back());
        next = std::span<const int>(tokens).last(1);
    }
    return out;
}

}  // namespace

TEST_CASE("lab08.logits.chunked_prefill_equals_one_pass") {
    needs_planner();
    Inputs in(5);
    const int V = bundled().model->config.vocab_size;
    const std::vector<int> prompt = in.tokens(in.integer(120, 300), V);
    const std::vector<float> want = one_pass_logits(prompt);
    // Rounding only: a chunk's rows go through other matmul shapes than one pass.
    const pd::lab::Tolerance tol{5e-4, 5e-4};
    for (int budget : {in.integer(5, 15), 16, in.integer(17, 64), 100, 512}) {
        auto inner = paged_engine();
        LogitsTap tap(*inner);
        StudentPlanner planner;
        Scheduler s(tap, planner, {{4, budget, false}, 512, -1, true, std::nullopt});
        s.add({0, prompt, 1, {}});  // sequence 0: the long prompt, one output token
        s.add({1, in.tokens(3, V), 60, {}});  // two streams decoding alongside
        s.add({2, in.tokens(5, V), 60, {}});
        for (int k = 0; k < 400 && tap.rows[0].empty(); k++) s.step();
        INFO("budget " << budget << ", a prompt of " << prompt.size() << " tokens");
        REQUIRE_MESSAGE(tap.rows[0].size() == 1, "the prompt's last chunk must ask for logits, once");
        const auto& got = tap.rows[0][0];
        observe("budget " + std::to_string(budget), got, tol);
        double worst = 0;
        for (int v = 0; v < V; v++)
            worst = std::max(worst, std::abs(double(got[std::size_t(v)]) - want[std::size_t(v)]) -
                                        (tol.atol + tol.rtol * std::abs(double(want[std::size_t(v)]))));
        CHECK_MESSAGE(worst <= 0, "the last token's logits after chunked prefill differ from one pass by "
                                      << worst << " beyond atol + rtol*|ref|: a chunk fed twice, skipped or out of order?");
    }
}

TEST_CASE("lab08.greedy.same_ids_chunked_and_unchunked") {
    needs_planner();
    Inputs in(6);
    const int V = bundled().model->config.vocab_size;
    std::vector<Request> rs;
    for (int i = 0; i < 3; i++) rs.push_back({i, in.tokens(in.integer(2, 12), V), 16, {}});
    rs.push_back({3, in.tokens(in.integer(150, 300), V), 8, {}});  // the long prompt, arriving at step 3
    std::vector<std::vector<int>> want;
    for (const Request& r : rs) want.push_back(one_pass_greedy(r.prompt, r.max_tokens));
    for (int budget : {in.integer(4, 24), 64, 512}) {  // 512: the context, every prompt in one pass
        auto engine = paged_engine();
        StudentPlanner planner;
        Scheduler s(*engine, planner, {{4, budget, false}, 512, -1, true, std::nullopt});
        std::map<int, std::vector<int>> got;
        for (int k = 0; k < 2000 && (k < 4 || !s.idle()); k++) {
            if (k < 4) s.add(rs[std::size_t(k)]);
            for (const auto& e : s.step()) got[e.request].push_back(e.token);
        }
        REQUIRE_MESSAGE(s.idle(), "some request never finished under budget " << budget);
        for (const Request& r : rs) {
            observe("budget " + std::to_string(budget) + " request " + std::to_string(r.id), got[r.id]);
            INFO("budget " << budget << ", request " << r.id << " (prompt of " << r.prompt.size() << ")");
            CHECK_MESSAGE(got[r.id] == want[std::size_t(r.id)],
                          "greedy ids must not depend on the budget: a scheduler decides WHEN a token is "
                          "computed, never WHICH");
        }
    }
}

TEST_CASE("lab08.seed.other_seed_other_inputs") {
    Inputs a(1, 0), b(1, 1);
    bool differ = false;
    for (int t = 0; t < 10; t++) differ = differ || random_world(a).seqs.size() != random_world(b).seqs.size();
    CHECK_MESSAGE(differ, "PDLAB_TEST_SEED must change the random states");
}
