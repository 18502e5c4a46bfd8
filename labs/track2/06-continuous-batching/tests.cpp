// Lab 06 tests: your StepPolicy against rules restated here and computed
// another way, on seeded random scheduler states, and then inside the kit's
// real Scheduler on a fake engine whose next token hashes each sequence's
// whole cached history (a token fed twice, skipped or fed to the wrong
// sequence changes every later token).
//   meson test -C build --suite track2-06        (all of them)
//   build/labs/track2/06-continuous-batching/lab06_tests --test-case='lab06.batch.*'
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "batch_rules.hpp"
#include "exercise.hpp"
#include "hash_engine.hpp"
#include "lab_test.hpp"
#include "serve/scheduler.hpp"
#include "show.hpp"

using namespace pd::lab06;
using pd::lab::alone;
using pd::lab::expected_batch;
using pd::lab::flat;
using pd::lab::HashEngine;
using pd::lab::Inputs;
using pd::lab::kHashVocab;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
using pd::lab::show;
using pd::serve::Scheduler;

namespace {

// A random scheduler state: waiting sequences not started (computed 0),
// running ones with 1..tokens left (a running sequence always has its next
// token to run), about one in `cancel_one_in` cancelled.
struct World {
    std::vector<SeqState> seqs;
    std::vector<int> waiting, running;
    SchedulerState view() const { return {seqs, waiting, running}; }
};

World random_world(Inputs& in, int cancel_one_in) {
    World w;
    const int n = in.integer(0, 24);
    std::vector<int> ids(static_cast<std::size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    for (int k = n - 1; k > 0; k--) std::swap(ids[std::size_t(k)], ids[std::size_t(in.integer(0, k))]);
    w.seqs.resize(std::size_t(n));
    for (int id : ids) {
        SeqState& q = w.seqs[std::size_t(id)];
        q.tokens = in.integer(1, 80);
        q.cancelled = cancel_one_in > 0 && in.integer(1, cancel_one_in) == 1;
        const bool runs = in.integer(0, 1) == 1;
        // Half the running ones decode (one token left), the rest are mid-prefill.
        q.computed = !runs ? 0 : in.integer(0, 1) ? q.tokens - 1 : in.integer(0, q.tokens - 1);
        (runs ? w.running : w.waiting).push_back(id);
    }
    return w;
}

StepLimits random_limits(Inputs& in) {
    return {in.integer(1, 16), in.integer(1, 96), in.integer(0, 3) == 0};
}

// ---- The rules, restated (README "One step, one batch"); the batch's, which
// lab 08 shares, is pd::lab::expected_batch (labs/common/batch_rules.hpp).
std::vector<int> expected_retire(const World& w) {
    std::vector<int> out;
    for (const auto* queue : {&w.waiting, &w.running})
        std::copy_if(queue->begin(), queue->end(), std::back_inserter(out),
                     [&](int id) { return w.seqs[std::size_t(id)].cancelled; });
    return out;
}

std::vector<int> expected_admit(const World& w, const StepLimits& lim) {
    const long room = lim.static_batching && !w.running.empty() ? 0 : lim.max_seqs - long(w.running.size());
    const long n = std::clamp(room, 0L, long(w.waiting.size()));
    return std::vector<int>(w.waiting.begin(), w.waiting.begin() + n);
}

}  // namespace

TEST_CASE("lab06.retire.random_states") {
    pd::lab::needs([] { World w; std::vector<int> o; StudentBatching().retire(w.view(), o); });
    Inputs in(1);
    for (int trial = 0; trial < 300; trial++) {
        const World w = random_world(in, 4);
        std::vector<int> got;
        got.reserve(w.seqs.size());
        StudentBatching().retire(w.view(), got);
        observe("retire: trial " + std::to_string(trial), got);
        INFO("waiting " << show(w.waiting) << ", running " << show(w.running));
        CHECK_MESSAGE(got == expected_retire(w), "every cancelled sequence, waiting ones first, each queue in order");
    }
}

TEST_CASE("lab06.admit.continuous_and_static") {
    pd::lab::needs([] { World w; std::vector<int> o; StudentBatching().admit(w.view(), {}, o); });
    Inputs in(2);
    for (int trial = 0; trial < 300; trial++) {
        const World w = random_world(in, 0);
        const StepLimits lim = random_limits(in);
        std::vector<int> got;
        got.reserve(w.seqs.size());
        StudentBatching().admit(w.view(), lim, got);
        observe("admit: trial " + std::to_string(trial), got);
        INFO((lim.static_batching ? "static" : "continuous") << ", max_seqs " << lim.max_seqs << ", running "
             << w.running.size() << ", waiting " << show(w.waiting));
        CHECK_MESSAGE(got == expected_admit(w, lim),
                      "the front of the queue, in order, up to max_seqs running; static: only when none runs");
    }
}

TEST_CASE("lab06.batch.random_states") {
    pd::lab::needs([] { World w; std::vector<BatchItem> o; StudentBatching().build_batch(w.view(), {}, o); });
    Inputs in(3);
    for (int trial = 0; trial < 300; trial++) {
        const World w = random_world(in, 0);
        const StepLimits lim = random_limits(in);
        std::vector<BatchItem> got;
        got.reserve(w.seqs.size());
        StudentBatching().build_batch(w.view(), lim, got);
        observe("batch: trial " + std::to_string(trial), flat(got));
        INFO("budget " << lim.max_tokens_per_step << ", running " << show(w.running));
        INFO("yours    " << show(got));
        const std::vector<BatchItem> want = expected_batch(w.view(), lim.max_tokens_per_step);
        CHECK_MESSAGE(flat(got) == flat(want),
                      "expected " << show(want)
                                  << ": decode rows first (one token each), then prefill chunks, both "
                                     "in running order, within the budget");
    }
}

TEST_CASE("lab06.batch.decode_first") {
    // Running: 0 decodes, 1 has 10 prompt tokens to go, 2 decodes. Budget 5.
    World w;
    w.seqs = {{8, 7, false}, {10, 0, false}, {4, 3, false}};
    w.running = {0, 1, 2};
    std::vector<BatchItem> got;
    got.reserve(3);
    StudentBatching().build_batch(w.view(), {4, 5, false}, got);
    observe("decode first", flat(got));
    CHECK_MESSAGE((flat(got) == std::vector<int>{0, 1, 2, 1, 1, 3}),
                  "two decode rows (seq 0, seq 2), then 3 of seq 1's 10 prompt tokens; yours " << show(got));
    got.clear();
    StudentBatching().build_batch(w.view(), {4, 1, false}, got);
    CHECK_MESSAGE((flat(got) == std::vector<int>{0, 1}), "a budget of 1: the oldest decode row only; yours " << show(got));
}


TEST_CASE("lab06.scheduler.tokens_as_if_alone") {
    pd::lab::needs([] { World w; std::vector<int> o; StudentBatching().retire(w.view(), o); });
    Inputs in(4);
    for (bool static_batching : {false, true}) {
        HashEngine engine;
        StudentBatching policy;
        pd::serve::SchedulerConfig cfg;
        cfg.limits = {in.integer(2, 6), in.integer(1, 24), static_batching};
        cfg.max_model_len = 1000;
        Scheduler s(engine, policy, cfg);
        std::vector<pd::serve::Request> rs;
        for (int i = 0; i < 16; i++) rs.push_back({i, in.tokens(in.integer(1, 30), kHashVocab), in.integer(1, 12), {}});
        std::map<int, std::vector<int>> got;
        for (int k = 0; k < 5000 && (k < 32 || !s.idle()); k++) {
            if (k % 2 == 0 && k / 2 < 16) s.add(rs[std::size_t(k / 2)]);
            for (const auto& e : s.step()) got[e.request].push_back(e.token);
        }
        REQUIRE_MESSAGE(s.idle(), "some request never finished: is every running sequence in some batch?");
        for (const auto& r : rs) {
            observe("request " + std::to_string(r.id) + (static_batching ? " static" : " continuous"), got[r.id]);
            INFO((static_batching ? "static" : "continuous") << " batching, request " << r.id);
            CHECK_MESSAGE(got[r.id] == alone(r.prompt, r.max_tokens),
                          "its tokens must be those it gets alone: each item runs a sequence's NEXT tokens");
        }
        CHECK(engine.most_items() <= std::size_t(cfg.limits.max_seqs));
        CHECK(engine.most_tokens() <= std::size_t(cfg.limits.max_tokens_per_step));
    }
}

TEST_CASE("lab06.scheduler.continuous_takes_fewer_steps") {
    pd::lab::needs([] { World w; std::vector<int> o; StudentBatching().retire(w.view(), o); });
    // One long answer among short ones: static batching keeps 3 slots idle while it runs.
    int steps[2] = {0, 0};
    for (bool static_batching : {false, true}) {
        HashEngine engine;
        StudentBatching policy;
        pd::serve::SchedulerConfig cfg;
        cfg.limits = {4, 64, static_batching};
        cfg.max_model_len = 1000;
        Scheduler s(engine, policy, cfg);
        for (int i = 0; i < 12; i++) s.add({i, {1 + i, 2, 3}, i % 4 == 0 ? 40 : 4, {}});
        while (!s.idle() && engine.steps.size() < 10000) s.step();
        steps[static_batching] = int(engine.steps.size());
    }
    observe("steps continuous, static", std::vector<int>{steps[0], steps[1]});
    INFO("continuous " << steps[0] << " steps, static " << steps[1]);
    // Continuous: a freed slot is refilled the next step. Requests 1-3 finish at
    // step 4, so 4, 5, 6 start at step 5; 5 and 6 finish at step 8, so 7 and 8
    // start at step 9; 9, 10, 11 follow one by one in slot 7's place. The last
    // 40-token answer, request 8, ends at step 9 + 39 = 48.
    CHECK_MESSAGE(steps[0] == 48, "continuous: request 8 (40 tokens) should start at step 9 and end at step 48");
    CHECK_MESSAGE(steps[1] == 120, "static: three batches of 4, each as long as its 40-token answer (3 x 40)");
}

TEST_CASE("lab06.seed.other_seed_other_inputs") {
    Inputs a(3, 0), b(3, 1);
    bool differ = false;
    for (int t = 0; t < 10; t++) differ = differ || random_world(a, 0).waiting != random_world(b, 0).waiting;
    CHECK_MESSAGE(differ, "PDLAB_TEST_SEED must change the random states");
}
