// Lab 17 tests: your configuration against the kit's check, your policy
// inside the kit's real Scheduler on a fake engine whose next token hashes
// each sequence's whole history (so a token run twice, skipped or given to
// the wrong sequence changes every later one), and on the real paged engine
// with a tight KV pool; then your goodput against the baseline's on the
// virtual clock. The lab17.kit cases check the kit itself (no points).
//   meson test -C build --suite track4-17
//   build/labs/track4/17-goodput-capstone/lab17_tests --test-case='lab17.goodput.*'
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common.hpp"
#include "exercise.hpp"
#include "hash_engine.hpp"
#include "lab_test.hpp"
#include "load/model_source.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/scheduler.hpp"
#include "show.hpp"

using namespace pd::lab17;
using pd::lab::alone;
using pd::lab::HashEngine;
using pd::lab::Inputs;
using pd::lab::kHashVocab;
using pd::lab::observe;
using pd::lab::show;

namespace {

// A trace of the family with seeded shape: rates, lengths, prefixes.
FamilySpec random_family(Inputs& in, int num_requests) {
    FamilySpec f;
    f.num_requests = num_requests;
    f.seed = std::uint64_t(in.integer(0, 1 << 30));
    f.calm_rate = in.uniform(1, 6);
    f.burst_rate = in.uniform(8, 30);
    f.prompt_len = fmt::format("lognormal:{}:0.9:8:{}", in.integer(20, 120), in.integer(200, 448));
    f.output_len = fmt::format("lognormal:{}:0.8:4:{}", in.integer(10, 60), in.integer(80, 160));
    f.shared_prefix_fraction = in.integer(0, 2) == 0 ? 0 : in.uniform(0.1, 0.8);
    f.prefix_len = 16 * in.integer(1, 10);
    return f;
}

StepCostModel random_cost(Inputs& in) {
    return {in.uniform(2, 12), in.uniform(0.01, 0.2), in.uniform(0, 0.0002)};
}

// The clock at every precision, with the default model's weight shares.
PrecisionCosts priced(const StepCostModel& f32) { return {f32, {1, 0.5, 0.266, 0.141}}; }

struct Workload {
    pd::serve::Trace trace;
    std::vector<pd::serve::Request> reqs;
};

Workload workload(const FamilySpec& f, int vocab) {
    Workload w;
    w.trace = generate_family(f, vocab);
    for (std::size_t i = 0; i < w.trace.size(); i++)
        w.reqs.push_back({int(i), w.trace[i].prompt_ids, w.trace[i].max_tokens, {}});
    return w;
}

// Every request's output ids, by request id.
std::map<int, std::vector<int>> outputs(const pd::serve::ReplayResult& r) {
    std::map<int, std::vector<int>> out;
    for (std::size_t i = 0; i < r.output_ids.size(); i++) out[int(i)] = r.output_ids[i];
    return out;
}

// Random scheduler states, as lab 06's tests draw them.
struct World {
    std::vector<SeqState> seqs;
    std::vector<int> waiting, running;
    SchedulerState view() const { return {seqs, waiting, running}; }
};

World random_world(Inputs& in) {
    World w;
    const int n = in.integer(0, 40);
    w.seqs.resize(std::size_t(n));
    for (int id = 0; id < n; id++) {
        SeqState& q = w.seqs[std::size_t(id)];
        q.arrival_s = in.uniform(0, 10);
        q.tokens = in.integer(1, 600);
        q.cancelled = in.integer(1, 5) == 1;
        const bool runs = in.integer(0, 1) == 1;
        q.computed = !runs ? 0 : in.integer(0, 1) ? q.tokens - 1 : in.integer(0, q.tokens - 1);
        (runs ? w.running : w.waiting).push_back(id);
    }
    return w;
}

const Slo kSlo;  // the program's default objectives

// A small real model: the paged engine's tests and the precisions' replays.
constexpr const char* kTinyModel = "synthetic:llama,dim=32,ffn=64,layers=1,heads=2,kv_heads=1,vocab=97,ctx=512";

}  // namespace

TEST_CASE("lab17.config.within_the_cap") {
    pd::lab::needs([] { choose_config({}, {}, {}, {}); });
    Inputs in(1);
    for (int trial = 0; trial < 40; trial++) {
        const FamilySpec f = random_family(in, in.integer(20, 200));
        const Workload w = workload(f, kHashVocab);
        const TraceSummary t = summarize(w.trace, w.reqs, f);
        const MemoryCap cap{in.integer(int(t.longest) + 16, 20000)};
        const Slo slo{in.uniform(200, 3000), in.uniform(20, 200)};
        const ServeConfig c = choose_config(t, slo, priced(random_cost(in)), cap);
        std::string refused;
        try {
            check_config(c, cap, t.longest);
        } catch (const pd::UserError& e) {
            refused = e.what();
        }
        // Configurations differ between correct solutions: only the verdict is compared.
        observe("config: trial " + std::to_string(trial) + " accepted", refused.empty());
        INFO("trial " << trial << ": cap " << cap.kv_positions << " positions, longest request " << t.longest);
        INFO("yours: max_seqs " << c.max_seqs << ", budget " << c.max_tokens_per_step << ", " << c.kv_blocks
                                << " blocks of " << c.block_size << ", precision " << c.precision);
        CHECK_MESSAGE(refused.empty(), "the kit refuses your configuration: " << refused);
    }
}

TEST_CASE("lab17.limits.random_states") {
    pd::lab::needs([] { World w; std::vector<int> o; ReplayTime t; GoodputPolicy(kSlo, {}, t).retire(w.view(), o); });
    Inputs in(2);
    for (int trial = 0; trial < 300; trial++) {
        const World w = random_world(in);
        const StepLimits lim{in.integer(1, 32), in.integer(1, 600), false};
        const ReplayTime now{in.uniform(0, 12)};  // some waiting requests are past the TTFT objective
        GoodputPolicy p(kSlo, random_cost(in), now);
        std::vector<int> retired, admitted;
        std::vector<BatchItem> batch;
        retired.reserve(w.seqs.size()), admitted.reserve(w.seqs.size()), batch.reserve(w.seqs.size());
        p.retire(w.view(), retired);
        std::set<int> cancelled;
        for (int id : w.waiting) if (w.seqs[std::size_t(id)].cancelled) cancelled.insert(id);
        for (int id : w.running) if (w.seqs[std::size_t(id)].cancelled) cancelled.insert(id);
        INFO("trial " << trial << ": waiting " << show(w.waiting) << ", running " << show(w.running));
        CHECK_MESSAGE(retired.size() == cancelled.size(), "retire: every cancelled sequence once; yours " << show(retired));
        CHECK_MESSAGE(std::set<int>(retired.begin(), retired.end()) == cancelled,
                      "retire: exactly the cancelled sequences; yours " << show(retired));
        // Admission and the batch on a state with nothing cancelled (retire ran before them).
        World live = w;
        for (auto& q : live.seqs) q.cancelled = false;
        p.admit(live.view(), lim, admitted);
        const std::set<int> waiting(live.waiting.begin(), live.waiting.end()), once(admitted.begin(), admitted.end());
        INFO("max_seqs " << lim.max_seqs << ", " << live.running.size() << " running; admitted " << show(admitted));
        CHECK_MESSAGE(int(live.running.size() + admitted.size()) <= std::max(lim.max_seqs, int(live.running.size())),
                      "admit: running + admitted must stay within max_seqs");
        CHECK_MESSAGE(once.size() == admitted.size(), "admit: each id once");
        CHECK_MESSAGE(std::includes(waiting.begin(), waiting.end(), once.begin(), once.end()),
                      "admit: only waiting ids");
        p.build_batch(live.view(), lim, batch);
        // Admissions and batches differ between correct policies: only retire's set is compared.
        observe("limits: trial " + std::to_string(trial) + " retired", std::vector<int>(cancelled.begin(), cancelled.end()));
        INFO("budget " << lim.max_tokens_per_step << "; batch " << show(batch));
        int tokens = 0;
        std::set<int> seen;
        for (const BatchItem& b : batch) {
            tokens += b.n;
            const bool running = std::find(live.running.begin(), live.running.end(), b.seq) != live.running.end();
            CHECK_MESSAGE(running, "build_batch: item of sequence " << b.seq << ", which is not running");
            if (running) {
                const int rest = live.seqs[std::size_t(b.seq)].remaining();
                CHECK_MESSAGE((b.n >= 1 && b.n <= rest), "build_batch: sequence " << b.seq << " has " << rest
                                                                                    << " tokens to run, the item " << b.n);
            }
            CHECK_MESSAGE(seen.insert(b.seq).second, "build_batch: sequence " << b.seq << " twice");
        }
        CHECK_MESSAGE(tokens <= lim.max_tokens_per_step, "build_batch: " << tokens << " tokens over the budget");
        const bool work = std::any_of(live.running.begin(), live.running.end(),
                                      [&](int id) { return live.seqs[std::size_t(id)].remaining() > 0; });
        CHECK_MESSAGE((!work || !batch.empty()), "build_batch: running sequences have tokens to run, the batch is empty");
    }
}

TEST_CASE("lab17.tokens.as_if_alone") {
    pd::lab::needs([] { World w; std::vector<int> o; ReplayTime t; GoodputPolicy(kSlo, {}, t).retire(w.view(), o); });
    Inputs in(3);
    for (int round = 0; round < 4; round++) {
        const FamilySpec f = random_family(in, 40);
        const Workload w = workload(f, kHashVocab);
        ServeConfig cfg{in.integer(1, 24), in.integer(1, 300), 16, 1 << 16, false, "f32"};
        HashEngine engine;
        ReplayTime time;
        GoodputPolicy policy(kSlo, random_cost(in), time);
        const auto r = replay_on(engine, policy, cfg, w.trace, w.reqs, virtual_clock({}), false, &time);
        for (const auto& q : w.reqs) {
            observe("round " + std::to_string(round) + " request " + std::to_string(q.id), r.output_ids[std::size_t(q.id)]);
            INFO("round " << round << ", request " << q.id << ", max_seqs " << cfg.max_seqs << ", budget "
                          << cfg.max_tokens_per_step);
            CHECK_MESSAGE(r.output_ids[std::size_t(q.id)] == alone(q.prompt, q.max_tokens),
                          "its tokens must be those it gets alone: each item runs a sequence's NEXT tokens");
        }
        CHECK(engine.most_items() <= std::size_t(cfg.max_seqs));
        CHECK(engine.most_tokens() <= std::size_t(cfg.max_tokens_per_step));
    }
}

TEST_CASE("lab17.tokens.paged_engine_tight_memory") {
    pd::lab::needs([] { World w; std::vector<int> o; ReplayTime t; GoodputPolicy(kSlo, {}, t).retire(w.view(), o); });
    // A small real model and a KV pool of a few requests: the Scheduler
    // preempts, prefixes are shared, and every request must still get the
    // tokens the baseline gives it (f32: a row does not depend on its batch-mates).
    Inputs in(4);
    auto lm = pd::load_model(kTinyModel, pd::Precision::f32, false);
    FamilySpec f = random_family(in, 24);
    f.prompt_len = "lognormal:30:0.8:4:120";
    f.output_len = "lognormal:12:0.6:2:40";
    f.prefix_len = 32;
    const Workload w = workload(f, lm.model->config.vocab_size);
    const long long longest = pd::serve::longest_request(w.reqs);
    std::map<int, std::vector<int>> want, got;
    for (bool baseline : {true, false}) {
        ServeConfig cfg{in.integer(2, 12), in.integer(8, 200), 8, int((3 * longest) / 8 + 2), true, "f32"};
        pd::serve::PagedOptions po;
        po.block_size = cfg.block_size, po.total_blocks = cfg.kv_blocks, po.prefix_caching = true;
        auto engine = pd::serve::make_paged_serving_engine(lm.model, po);
        pd::serve::ContinuousBatching base;
        ReplayTime time;
        GoodputPolicy mine(kSlo, {}, time);
        pd::serve::StepPolicy& policy = baseline ? static_cast<pd::serve::StepPolicy&>(base) : mine;
        const auto r = replay_on(*engine, policy, cfg, w.trace, w.reqs, virtual_clock({}), false, &time);
        (baseline ? want : got) = outputs(r);
    }
    for (const auto& [id, ids] : want) {
        observe("paged request " + std::to_string(id), got[id]);
        CHECK_MESSAGE(got[id] == ids, "request " << id << ": other tokens than the baseline's on the same engine");
    }
}

TEST_CASE("lab17.goodput.beats_the_baseline") {
    pd::lab::needs([] { choose_config({}, {}, {}, {}); });
    // The public trace, then one drawn from PDLAB_TEST_SEED, on the default
    // cost model: your configuration and policy against the baseline. Yours
    // runs on the clock of its precision; the fake engine has no precision,
    // so the quality floor is the program's check (lab17.kit.precisions tests it).
    Inputs in(5);
    for (std::uint64_t seed : {std::uint64_t(1), std::uint64_t(in.integer(2, 1 << 30))}) {
        FamilySpec f;
        f.seed = seed;
        const Workload w = workload(f, kHashVocab);
        const MemoryCap cap;
        const PrecisionCosts costs = priced({});
        double goodput[2] = {0, 0};
        for (bool baseline : {true, false}) {
            const ServeConfig cfg = baseline ? baseline_config(cap)
                                             : choose_config(summarize(w.trace, w.reqs, f), kSlo, costs, cap);
            check_config(cfg, cap, pd::serve::longest_request(w.reqs));
            const StepCostModel cost = costs.at(cfg.precision);
            HashEngine engine;
            pd::serve::ContinuousBatching base;
            ReplayTime time;
            GoodputPolicy mine(kSlo, cost, time);
            pd::serve::StepPolicy& policy = baseline ? static_cast<pd::serve::StepPolicy&>(base) : mine;
            goodput[baseline] =
                score(replay_on(engine, policy, cfg, w.trace, w.reqs, virtual_clock(cost), false, &time), kSlo).goodput;
        }
        // Your goodput may beat the reference's: only the verdict and the baseline's are compared.
        observe("goodput seed " + std::to_string(seed) + " at least the baseline's", goodput[0] >= goodput[1]);
        observe("goodput seed " + std::to_string(seed) + " baseline", goodput[1], {0, 1e-12});
        INFO("trace seed " << seed << ": yours " << goodput[0] << " req/s, the baseline " << goodput[1] << " req/s");
        CHECK_MESSAGE(goodput[0] >= goodput[1], "your goodput must be at least the baseline's");
    }
}

TEST_CASE("lab17.kit.virtual_clock") {
    // One request, 4 prompt tokens, 3 outputs, a step of 10 ms + 1 ms a row +
    // 0.5 ms a pair: the prefill (4 rows, 10 pairs) ends at 19 ms, each
    // decode (1 row, 5 then 6 pairs) adds 13.5 then 14 ms.
    HashEngine engine;
    pd::serve::ContinuousBatching policy;
    pd::serve::Trace trace(1);
    trace[0].arrival_s = 0.5;
    const std::vector<pd::serve::Request> reqs = {{0, {5, 6, 7, 8}, 3, {}}};
    ReplayTime time{-1};
    const auto r = replay_on(engine, policy, {}, trace, reqs, virtual_clock({10, 1, 0.5}), false, &time);
    CHECK(time.now_s == doctest::Approx(0.5325));  // the last step began after the first decode
    const std::vector<double> want = {0.519, 0.5325, 0.5465};
    REQUIRE(r.timings[0].token_s.size() == 3);
    observe("virtual token times", r.timings[0].token_s, {1e-12, 0});
    for (std::size_t i = 0; i < 3; i++) CHECK(r.timings[0].token_s[i] == doctest::Approx(want[i]).epsilon(1e-12));
    CHECK(score(r, {19.001, 14.001}).good == 1);
    CHECK(score(r, {18.9, 14.001}).good == 0);  // the TTFT objective missed by 0.1 ms
    CHECK(score(r, {19.001, 13.9}).good == 0);  // the second gap is 14 ms
}

TEST_CASE("lab17.kit.precisions") {
    // Every precision the engine has runs a replay, on its own model: the
    // agreement with f32 is counted from the tokens (1 for f32 itself, less
    // where quantization changed a greedy choice), and the clock's weights_ms
    // scales with the bytes measured from the model's matrices.
    auto f32_model = pd::load_model(kTinyModel, pd::Precision::f32, false);
    const PrecisionCosts costs = precision_costs({6, 0.06, 0.00004}, f32_model.model->w);
    CHECK(costs.weight_share[0] == 1);
    CHECK(costs.weight_share[1] == doctest::Approx(0.5));
    CHECK(costs.weight_share[3] < costs.weight_share[2]);
    CHECK(costs.weight_share[2] < 0.5);
    CHECK(costs.at("int8").weights_ms == doctest::Approx(6 * costs.weight_share[2]));
    CHECK(costs.at("int8").per_token_ms == 0.06);
    CHECK_THROWS_WITH_AS(costs.at("fp8"), doctest::Contains("fp8"), pd::UserError);
    FamilySpec f;
    f.num_requests = 12, f.prompt_len = "lognormal:20:0.5:4:60", f.output_len = "lognormal:12:0.5:4:24";
    const Workload w = workload(f, f32_model.model->config.vocab_size);
    pd::serve::ReplayResult f32_run;
    for (const char* name : {"f32", "bf16", "int8", "int4"}) {
        const pd::Precision p = pd::parse_precision(name);
        auto lm = p == pd::Precision::f32 ? f32_model : pd::load_model(kTinyModel, p, false);
        // The share is the bytes of the model loaded at that precision over f32's.
        CHECK(costs.weight_share[std::size_t(p.format)] ==
              doctest::Approx(double(pd::matmul_weight_bytes(lm.model->w)) /
                              double(pd::matmul_weight_bytes(f32_model.model->w))));
        ServeConfig cfg{4, 64, 8, 256, true, name};
        pd::serve::PagedOptions po;
        po.block_size = cfg.block_size, po.total_blocks = cfg.kv_blocks, po.prefix_caching = true;
        auto engine = pd::serve::make_paged_serving_engine(lm.model, po);
        pd::serve::ContinuousBatching policy;
        const auto r = replay_on(*engine, policy, cfg, w.trace, w.reqs, virtual_clock(costs.at(name)), false);
        if (p == pd::Precision::f32) f32_run = r;
        long long same = 0, all = 0;
        for (std::size_t i = 0; i < w.reqs.size(); i++)
            for (std::size_t k = 0; k < f32_run.output_ids[i].size(); k++, all++)
                same += k < r.output_ids[i].size() && r.output_ids[i][k] == f32_run.output_ids[i][k];
        INFO(name << ": " << same << " of " << all << " tokens as f32's");
        CHECK(token_agreement(r, f32_run) == doctest::Approx(double(same) / double(all)));
        if (p == pd::Precision::f32) CHECK(token_agreement(r, f32_run) == 1);
        if (pd::is_int4(p)) CHECK(token_agreement(r, f32_run) < 1);  // 4 bits change some greedy choice
    }
}

TEST_CASE("lab17.kit.speculation") {
    // speculative_k reaches the Scheduler: with a policy that gives a decode
    // row its proposed tokens (the engine's ContinuousBatching does), every
    // request keeps the tokens it gets without speculation, in fewer steps,
    // and the virtual clock prices the checked rows (a kept token saves a
    // step's weights_ms; each checked row costs per_token_ms).
    auto lm = pd::load_model(kTinyModel, pd::Precision::f32, false);
    FamilySpec f;
    f.num_requests = 8, f.prompt_len = "lognormal:20:0.5:4:60", f.output_len = "lognormal:40:0.3:30:60";
    const Workload w = workload(f, lm.model->config.vocab_size);
    const StepCostModel cost{6, 0.06, 0.00004};
    pd::serve::ReplayResult off, on;
    for (int k : {0, 4}) {
        ServeConfig cfg{4, 64, 8, 256, true, "f32", k};
        pd::serve::PagedOptions po;
        po.block_size = cfg.block_size, po.total_blocks = cfg.kv_blocks, po.prefix_caching = true;
        auto engine = pd::serve::make_paged_serving_engine(lm.model, po);
        pd::serve::ContinuousBatching policy;
        (k == 0 ? off : on) = replay_on(*engine, policy, cfg, w.trace, w.reqs, virtual_clock(cost), false);
    }
    CHECK(on.output_ids == off.output_ids);
    INFO("steps: " << off.steps << " without speculation, " << on.steps << " with k = 4");
    CHECK(on.steps < off.steps);
}

TEST_CASE("lab17.kit.checks") {
    const MemoryCap cap{1024};
    CHECK_NOTHROW(check_config({8, 256, 16, 64, true}, cap, 500));
    CHECK_THROWS_WITH_AS(check_config({8, 256, 16, 65, true}, cap, 500),
                         doctest::Contains("over the memory cap of 1024 positions: give at most 64 blocks of 16"),
                         pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({8, 256, 16, 20, true}, cap, 500),
                         doctest::Contains("cannot hold the longest request"), pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({0, 256, 16, 64, true}, cap, 500), doctest::Contains("max_seqs is 0"),
                         pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({8, 0, 16, 64, true}, cap, 500), doctest::Contains("max_tokens_per_step"),
                         pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({8, 256, 0, 64, true}, cap, 500), doctest::Contains("block_size"), pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({8, 256, 16, 64, true, "fp8"}, cap, 500),
                         doctest::Contains("precision: unknown precision \"fp8\""), pd::UserError);
    for (const char* p : {"f32", "bf16", "int8", "int4"}) CHECK_NOTHROW(check_config({8, 256, 16, 64, true, p}, cap, 500));
    CHECK_NOTHROW(check_config({8, 256, 16, 64, true, "f32", 16}, cap, 500));
    CHECK_THROWS_WITH_AS(check_config({8, 256, 16, 64, true, "f32", -1}, cap, 500),
                         doctest::Contains("speculative_k is -1"), pd::UserError);
    CHECK_THROWS_WITH_AS(check_config({8, 256, 16, 64, true, "f32", 17}, cap, 500),
                         doctest::Contains("speculative_k is 17"), pd::UserError);
    CHECK_THROWS_AS(parse_cost("6,0.06"), pd::UserError);
    CHECK_THROWS_AS(parse_cost("6,nan,0"), pd::UserError);
    CHECK_THROWS_AS(parse_cost("0,1,1"), pd::UserError);
    CHECK_THROWS_AS(parse_cost("6,0.06,0.1x"), pd::UserError);
    const StepCostModel c = parse_cost("6,0.06,0.00004");
    CHECK(c.weights_ms == 6);
    CHECK(c.per_pair_ms == 0.00004);
    // The fit recovers an exact model, and leaves out a term the noise makes negative.
    std::vector<StepTiming> steps;
    for (long long rows : {1, 8, 64, 256})
        for (long long pairs : {10LL, 5000LL, 90000LL}) steps.push_back({{rows, pairs}, 4 + 0.1 * rows + 1e-4 * pairs});
    const StepCostModel fit = fit_cost(steps);
    CHECK(fit.weights_ms == doctest::Approx(4));
    CHECK(fit.per_token_ms == doctest::Approx(0.1));
    CHECK(fit.per_pair_ms == doctest::Approx(1e-4));
    for (auto& s : steps) s.ms = 4 + 0.1 * double(s.shape.rows) - 1e-6 * double(s.shape.pairs);
    CHECK(fit_cost(steps).per_pair_ms == 0);
    CHECK_THROWS_AS(fit_cost(std::span(steps).first(2)), pd::UserError);
}

TEST_CASE("lab17.seed.other_seed_other_inputs") {
    Inputs a(1, 0), b(1, 1);
    CHECK_MESSAGE(random_family(a, 10).seed != random_family(b, 10).seed, "PDLAB_TEST_SEED must change the traces");
}
