// engine.model / engine.attention / engine.kv_cache: the two phases agree with
// each other and with a cache-free reference.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "engine/attention.hpp"
#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/generate.hpp"
#include "engine/step_plan.hpp"
#include "engine/team.hpp"
#include "load/model_source.hpp"
#include "reference.hpp"

using namespace pd;
using namespace pd::test;

namespace {

// Small models of both families and all three attention kinds.
const char* kModels[] = {
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=4,vocab=97,ctx=64,tied=0",  // MHA
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64",         // GQA
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=1,vocab=97,ctx=64",         // MQA
    "synthetic:gpt2,dim=64,ffn=256,layers=2,heads=4,vocab=97,ctx=64",                    // GPT-2
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64,window=6",  // Mistral's window
};

std::vector<int> some_tokens(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; i++) t[i] = (i * 37 + seed * 11 + 5) % vocab;
    return t;
}

std::vector<float> copy_logits(const float* p, std::size_t rows, int V) {
    return std::vector<float>(p, p + rows * V);
}

}  // namespace

TEST_CASE("engine.model.prefill_equals_token_by_token_decode") {
    for (const char* spec : kModels)
        for (Precision p : {Precision::f32, Precision::bf16}) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            auto lm = load_model(spec, p, false);
            const Model& m = *lm.model;
            const int V = m.config.vocab_size, T = 20;  // T > 16: prefill takes the oneDNN path
            auto toks = some_tokens(T, V, 1);
            KVCache c1 = make_kv_cache(m, 1);
            RunState s1 = make_run_state(m.config, 1);
            auto all = copy_logits(prefill(m, c1, s1, 0, toks, Keep::all), T, V);
            CHECK(c1.seq_len[0] == T);
            // Token by token: prefill the first, decode the rest.
            KVCache c2 = make_kv_cache(m, 1);
            RunState s2 = make_run_state(m.config, 1);
            std::vector<float> step = copy_logits(prefill(m, c2, s2, 0, {toks.data(), 1}), 1, V);
            int slot = 0;
            // bf16 prefill rounds activations to bf16 before oneDNN's matmul, decode does not.
            float tol = p == Precision::f32 ? 2e-4f : 3e-2f;
            check_close(step.data(), all.data(), V, tol, tol, "position 0");
            for (int i = 1; i < T; i++) {
                step = copy_logits(decode(m, c2, s2, {&slot, 1}, {&toks[i], 1}), 1, V);
                check_close(step.data(), all.data() + std::size_t(i) * V, V, tol, tol,
                            fmt::format("position {}: decode logits differ from prefill's", i));
            }
            CHECK(c2.seq_len[0] == T);
        }
}

TEST_CASE("engine.model.chunked_prefill_continues_the_cache") {
    for (const char* spec : kModels) {
        INFO(std::string(spec));
        auto lm = load_model(spec, Precision::f32, false);
        const Model& m = *lm.model;
        const int V = m.config.vocab_size;
        auto toks = some_tokens(30, V, 2);
        KVCache c1 = make_kv_cache(m, 1);
        RunState s1 = make_run_state(m.config, 1);
        auto whole = copy_logits(prefill(m, c1, s1, 0, toks), 1, V);
        // The same prompt in chunks of 7, 18 (oneDNN path) and 5 tokens.
        KVCache c2 = make_kv_cache(m, 1);
        RunState s2 = make_run_state(m.config, 1);
        prefill(m, c2, s2, 0, {toks.data(), 7});
        prefill(m, c2, s2, 0, {toks.data() + 7, 18});
        auto chunked = copy_logits(prefill(m, c2, s2, 0, {toks.data() + 25, 5}), 1, V);
        CHECK(c2.seq_len[0] == 30);
        check_close(chunked, whole, 2e-4f, 2e-4f, "last logits after chunked prefill");
    }
}

TEST_CASE("engine.model.batched_decode_equals_single") {
    auto lm = load_model(kModels[1], Precision::f32, false);
    const Model& m = *lm.model;
    const int V = m.config.vocab_size, B = 3;
    // Three sequences of different lengths decode together.
    KVCache cb = make_kv_cache(m, B);
    RunState sb = make_run_state(m.config, B);
    std::vector<std::vector<int>> prompts = {some_tokens(5, V, 3), some_tokens(12, V, 4), some_tokens(1, V, 5)};
    for (int b = 0; b < B; b++) prefill(m, cb, sb, b, prompts[b]);
    std::vector<int> slots = {0, 1, 2}, next = {7, 8, 9};
    auto batched = copy_logits(decode(m, cb, sb, slots, next), B, V);
    for (int b = 0; b < B; b++) {
        KVCache c = make_kv_cache(m, 1);
        RunState s = make_run_state(m.config, 1);
        prefill(m, c, s, 0, prompts[b]);
        int slot = 0;
        auto single = copy_logits(decode(m, c, s, {&slot, 1}, {&next[b], 1}), 1, V);
        check_close(batched.data() + std::size_t(b) * V, single.data(), V, 1e-5f, 1e-5f,
                    fmt::format("sequence {} of the batch", b));
        CHECK(cb.seq_len[b] == int(prompts[b].size()) + 1);
    }
}

TEST_CASE("engine.model.cache_and_no_cache_greedy_agree") {
    for (const char* spec : kModels) {
        INFO(std::string(spec));
        auto lm = load_model(spec, Precision::f32, false);
        auto engine = make_engine(lm.model, {});
        GenerateOptions g;
        g.max_new_tokens = 12;
        g.stop_at_eos = false;
        auto prompt = some_tokens(6, lm.model->config.vocab_size, 6);
        auto with = generate(*engine, prompt, g);
        g.use_cache = false;
        auto without = generate(*engine, prompt, g);
        CHECK(with.generated_ids == without.generated_ids);
        CHECK(with.trace.size() == 12);
        CHECK(with.trace[1].tokens_in == 1);
        CHECK(without.trace[1].tokens_in == 7);
    }
}

TEST_CASE("engine.kv_cache.grows_one_column_per_decode_step") {
    auto lm = load_model("synthetic:mha-h8-d64", Precision::f32, false);
    auto engine = make_engine(lm.model, {});
    GenerateOptions g;
    g.max_new_tokens = 3;
    g.stop_at_eos = false;
    auto r = generate(*engine, std::vector<int>{1, 2, 3, 4}, g);
    REQUIRE(r.trace.size() == 3);
    CHECK(r.trace[0].kv_shape == "[1, 8, 4, 64]");
    CHECK(r.trace[0].logits_pos == 3);
    CHECK(r.trace[1].kv_shape == "[1, 8, 5, 64]");
    CHECK(r.trace[1].logits_token == r.generated_ids[0]);
    CHECK(r.trace[2].kv_shape == "[1, 8, 6, 64]");
    CHECK(engine->cache_len(0) == 6);
}

TEST_CASE("engine.attention.prefill_matches_reference") {
    // Cache-free reference attention over the same q, k, v, for MHA/GQA/MQA;
    // head sizes that are and are not a multiple of the vector width (the
    // kernels' tails), and prompts longer than one query block (32 with
    // AVX-512) and than one online-softmax chunk of keys (64); decode's
    // groups of 1, 3, 4, 6 and 8 query heads per KV head (its kernel takes
    // heads in pairs and keys in fours: T % 4 is 1, 2 and 3 here).
    for (auto [Hq, Hkv] : {std::pair{4, 4}, {8, 2}, {6, 1}, {12, 4}, {8, 1}})
        for (auto [T, D] : {std::pair{9, 16}, {70, 20}, {33, 64}, {130, 8}, {67, 128}}) {
            const int S = T + 3;
            KVCache c = make_kv_cache(1, 1, Hkv, S, D);
            auto q = randn(std::size_t(T) * Hq * D, 21), k = randn(std::size_t(T) * Hkv * D, 22),
                 v = randn(std::size_t(T) * Hkv * D, 23);
            for (int t = 0; t < T; t++) kv_write(c, 0, 0, t, &k[std::size_t(t) * Hkv * D], &v[std::size_t(t) * Hkv * D]);
            std::vector<float> got(q.size()), ref(q.size());
            attention_prefill(got.data(), q.data(), c, 0, 0, 0, T, Hq);
            ref::attention(ref.data(), q.data(), k.data(), v.data(), T, Hq, Hkv, D);
            const auto what = fmt::format("attention Hq={} Hkv={} T={} D={}", Hq, Hkv, T, D);
            check_close(got, ref, 1e-5f, 1e-4f, what);
            // Decode for the last position equals prefill's last row.
            std::vector<float> dec(std::size_t(Hq) * D);
            int slot = 0, pos = T - 1;
            attention_decode(dec.data(), q.data() + std::size_t(T - 1) * Hq * D, c, 0, &slot, &pos, 1, Hq);
            check_close(dec.data(), ref.data() + std::size_t(T - 1) * Hq * D, dec.size(), 1e-5f, 1e-4f,
                        "decode row, " + what);
        }
}

TEST_CASE("engine.attention.sliding_window_matches_reference") {
    // Query t sees keys t-W+1 .. t: windows inside one query block, across
    // block edges, one key only, and one as long as the prompt (no effect).
    for (auto [Hq, Hkv] : {std::pair{8, 2}, {4, 1}})
        for (auto [T, D, W] : {std::tuple{40, 16, 5}, {70, 20, 33}, {9, 8, 1}, {33, 64, 33}}) {
            KVCache c = make_kv_cache(1, 1, Hkv, T, D);
            auto q = randn(std::size_t(T) * Hq * D, 31), k = randn(std::size_t(T) * Hkv * D, 32),
                 v = randn(std::size_t(T) * Hkv * D, 33);
            for (int t = 0; t < T; t++) kv_write(c, 0, 0, t, &k[std::size_t(t) * Hkv * D], &v[std::size_t(t) * Hkv * D]);
            std::vector<float> got(q.size()), ref(q.size());
            attention_prefill(got.data(), q.data(), c, 0, 0, 0, T, Hq, W);
            ref::attention(ref.data(), q.data(), k.data(), v.data(), T, Hq, Hkv, D, W);
            const auto what = fmt::format("windowed attention Hq={} Hkv={} T={} D={} W={}", Hq, Hkv, T, D, W);
            check_close(got, ref, 1e-5f, 1e-4f, what);
            // Chunked: the last 7 queries after the first T-7 are cached.
            std::vector<float> tail(std::size_t(7) * Hq * D);
            attention_prefill(tail.data(), q.data() + std::size_t(T - 7) * Hq * D, c, 0, 0, T - 7, 7, Hq, W);
            check_close(tail.data(), ref.data() + std::size_t(T - 7) * Hq * D, tail.size(), 1e-5f, 1e-4f,
                        "a chunk after a cached prefix, " + what);
            std::vector<float> dec(std::size_t(Hq) * D);
            int slot = 0, pos = T - 1;
            attention_decode(dec.data(), q.data() + std::size_t(T - 1) * Hq * D, c, 0, &slot, &pos, 1, Hq, W);
            check_close(dec.data(), ref.data() + std::size_t(T - 1) * Hq * D, dec.size(), 1e-5f, 1e-4f,
                        "decode row, " + what);
        }
}

TEST_CASE("engine.attention.gqa_head_map") {
    CHECK(kv_head_for(0, 8, 2) == 0);
    CHECK(kv_head_for(3, 8, 2) == 0);
    CHECK(kv_head_for(4, 8, 2) == 1);
    CHECK(kv_head_for(7, 8, 2) == 1);
    CHECK(kv_head_for(5, 8, 8) == 5);  // MHA: its own head
    CHECK(kv_head_for(5, 8, 1) == 0);  // MQA: all share one
}

TEST_CASE("engine.model.bad_input") {
    auto lm = load_model(kModels[0], Precision::f32, false);
    const Model& m = *lm.model;
    KVCache c = make_kv_cache(m, 1);
    RunState s = make_run_state(m.config, 1);
    std::vector<int> bad = {1, 97};
    CHECK_THROWS_WITH_AS(prefill(m, c, s, 0, bad), doctest::Contains("out of range"), UserError);
    std::vector<int> too_long(65, 1);
    CHECK_THROWS_WITH_AS(prefill(m, c, s, 0, too_long), doctest::Contains("context length"), UserError);
    int slot = 0, tok = 1;
    CHECK_THROWS_WITH_AS(decode(m, c, s, {&slot, 1}, {&tok, 1}), doctest::Contains("before any prefill"), UserError);
}

TEST_CASE("engine.model.decode_refuses_a_slot_named_twice") {
    // Two rows for one sequence would write the same cache position and
    // advance its length by 2, leaving a hole.
    auto lm = load_model(kModels[1], Precision::f32, false);
    EngineOptions o;
    o.batch = 2;
    auto engine = make_engine(lm.model, o);
    engine->prefill(0, some_tokens(4, 97, 1));
    engine->prefill(1, some_tokens(3, 97, 2));
    std::vector<int> slots = {1, 0, 1}, next = {5, 6, 7};
    CHECK_THROWS_WITH_AS(engine->decode(slots, next), doctest::Contains("slot 1 appears twice"), UserError);
    CHECK(engine->cache_len(0) == 4);
    CHECK(engine->cache_len(1) == 3);
}

TEST_CASE("engine.step_plan.prefill_and_decode_rows") {
    // The host layer's contiguous steps: a prefill's positions continue its
    // slot's length, its kept run is the last row or every row; a decode
    // step has a row per slot at its length, every row kept; commit advances
    // the slots the step wrote and no other.
    auto lm = load_model(kModels[1], Precision::f32, false);
    const Config& c = lm.model->config;
    std::vector<int> len = {5, 0, 9};
    const std::vector<int> prompt = {4, 5, 6}, slots = {2, 0}, next = {7, 8};
    StepPlan p;
    plan_prefill(p, c, {len, 16}, 1, prompt, Keep::last);
    CHECK(p.kind == StepKind::prefill);
    CHECK((p.token == prompt && p.slot == std::vector<int>{1, 1, 1} && p.pos == std::vector<int>{0, 1, 2}));
    CHECK((p.first_kept == 2 && p.n_kept == 1));
    commit(p, len);
    CHECK(len == std::vector<int>{5, 3, 9});
    plan_prefill(p, c, {len, 16}, 0, prompt, Keep::all);
    CHECK((p.pos == std::vector<int>{5, 6, 7} && p.first_kept == 0 && p.n_kept == 3));
    plan_decode(p, c, {len, 16}, slots, next);
    CHECK((p.kind == StepKind::decode && p.token == next && p.slot == slots && p.pos == std::vector<int>{9, 5}));
    CHECK((p.first_kept == 0 && p.n_kept == 2));
    commit(p, len);
    CHECK(len == std::vector<int>{6, 3, 10});
    CHECK_THROWS_WITH_AS(commit(p), doctest::Contains("internal error"), std::exception);
    CHECK_THROWS_WITH_AS(plan_prefill(p, c, {len, 16}, 2, std::vector<int>(7, 1), Keep::last),
                         doctest::Contains("context length of 16"), UserError);
    // Reset and truncate: the lengths' one owner, on either device.
    truncate_length(len, 2, 4);
    CHECK(len[2] == 4);
    CHECK_THROWS_WITH_AS(truncate_length(len, 2, 5), doctest::Contains("it holds 4"), UserError);
    reset_length(len, 0);
    CHECK(len == std::vector<int>{0, 3, 4});
    CHECK_THROWS_WITH_AS(reset_length(len, 3), doctest::Contains("outside the cache's batch of 3"), UserError);
}

TEST_CASE("engine.kv_cache.reset_checks_the_slot") {
    auto lm = load_model(kModels[0], Precision::f32, false);
    auto engine = make_engine(lm.model, {});
    for (int slot : {1, -1})
        CHECK_THROWS_WITH_AS(engine->reset(slot), doctest::Contains("outside the cache's batch of 1"), UserError);
    GenerateOptions g;
    g.slot = 1;
    CHECK_THROWS_WITH_AS(generate(*engine, some_tokens(3, 97, 3), g),
                         doctest::Contains("outside the cache's batch of 1"), UserError);
}

TEST_CASE("engine.model.generate_fills_the_context_exactly") {
    // n new tokens take P + n - 1 positions: the last one is never fed back.
    auto lm = load_model(kModels[0], Precision::f32, false);  // context 64
    auto engine = make_engine(lm.model, {});
    auto prompt = some_tokens(60, 97, 4);
    GenerateOptions g;
    g.max_new_tokens = 5;
    g.stop_at_eos = false;
    for (bool cache : {true, false}) {
        g.use_cache = cache;
        CHECK(generate(*engine, prompt, g).generated_ids.size() == 5);
        CHECK(engine->cache_len(0) == 64);
    }
    g.max_new_tokens = 6;
    CHECK_THROWS_WITH_AS(generate(*engine, prompt, g), doctest::Contains("context length of 64"), UserError);
}

// A checkpoint lists several EOS ids (Llama 3.1: 128001, 128008, 128009):
// generate stops at whichever comes first, the 2nd or 3rd of the list too, and
// runs past all of them with stop_at_eos off (--ignore-eos).
TEST_CASE("engine.model.generate_stops_at_any_eos_id") {
    auto lm = load_model("tiny", Precision::f32, false);
    const std::vector<int> prompt = lm.tokenizer.encode("Once upon a time");
    GenerateOptions g;
    g.max_new_tokens = 16;
    g.stop_at_eos = false;
    const std::vector<int> free_run = generate(*make_engine(lm.model, {}), prompt, g).generated_ids;
    for (std::size_t p : {3, 7})
        for (const std::vector<int>& eos : eos_lists_hitting(free_run, p)) {
            INFO("EOS ids " << eos[0] << ", " << eos[1] << ", " << eos[2] << "; output " << p);
            auto model = std::make_shared<Model>(*lm.model);
            model->config.eos_ids = eos;
            auto engine = make_engine(model, {});
            g.stop_at_eos = true;
            const GenerateResult r = generate(*engine, prompt, g);
            CHECK(r.generated_ids == until_first(free_run, p));
            CHECK(r.stopped_at_eos);
            g.stop_at_eos = false;
            CHECK(generate(*engine, prompt, g).generated_ids == free_run);
        }
}

TEST_CASE("engine.model.decode_of_a_full_batch_keeps_its_buffers") {
    // model.hpp promises that decode never allocates: that holds for a batch
    // larger than the small-M kernel's 16 rows too.
    auto lm = load_model(kModels[1], Precision::f32, false);
    const Model& m = *lm.model;
    const int B = 20;
    KVCache c = make_kv_cache(m, B);
    RunState s = make_run_state(m.config, B);
    std::vector<int> slots(B), next(B, 3);
    for (int b = 0; b < B; b++) slots[b] = b, prefill(m, c, s, b, some_tokens(2, 97, b));
    const float* logits = s.logits.data();
    const int* rows = s.plan.token.data();
    CHECK(decode(m, c, s, slots, next) == logits);
    CHECK(s.plan.token.data() == rows);  // the step plan's rows too
}

TEST_CASE("engine.model.engines_sharing_a_model_run_on_several_threads") {
    // Engines of one model share its packed weights, whose oneDNN scratch is
    // per row count, not per engine: each thread must still get the logits
    // an engine alone gives. (bf16 at this size and prompt length is where
    // overlapping passes did corrupt each other's scratch.)
    auto lm = load_model("synthetic:llama,dim=256,ffn=512,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64",
                         Precision::bf16, false);
    const int V = lm.model->config.vocab_size, T = 60;  // T > 16: the oneDNN path
    auto prompt = some_tokens(T, V, 5);
    auto alone = make_engine(lm.model, {});
    const auto want = copy_logits(alone->prefill(0, prompt, Keep::all), T, V);
    std::vector<std::vector<float>> last(4);  // per thread: the first logits that differ, else the last
    std::atomic<int> ready = 0;
    auto run = [&](std::vector<float>& got) {
        auto engine = make_engine(lm.model, {});
        ready++;
        while (ready < int(last.size())) std::this_thread::yield();  // start together, to overlap
        for (int i = 0; i < 100; i++) {
            engine->reset(0);
            got = copy_logits(engine->prefill(0, prompt, Keep::all), T, V);
            if (got != want) return;
        }
    };
    std::vector<std::thread> threads;
    for (auto& got : last) threads.emplace_back(run, std::ref(got));
    for (auto& t : threads) t.join();
    for (const auto& got : last) check_close(got, want, 0, 0, "logits of a concurrent prefill");
}

// A model keeps the row-major copy of its matrices only for a CUDA engine to
// upload: once the CPU has packed them, a CPU-only model frees them (1B f32:
// 4.4 GB) but keeps what its forward reads as it is (embeddings, norms), and
// answers exactly as a model that kept them.
TEST_CASE("engine.model.row_major_matrices_kept_only_for_a_cuda_engine") {
    for (const char* spec : {kModels[0], kModels[1]}) {  // untied head, tied head
        INFO(std::string(spec));
        auto cpu_only = load_model(spec, Precision::f32, false);
        auto both = load_model(spec, Precision::f32, false, {.cpu = true, .cuda = true});
        const Config& c = cpu_only.model->config;
        for (const Weights* w : {&cpu_only.model->w, &both.model->w}) {
            const bool kept = w == &both.model->w;
            INFO((kept ? "loaded for cpu and cuda" : "loaded for the cpu only"));
            CHECK(w->rows_released == !kept);
            for (const LayerWeights& L : w->layers)
                for (const Matrix* m : {&L.qkv, &L.attn_out, &L.mlp_in, &L.mlp_out})
                    CHECK(m->w.size() == (kept ? std::size_t(m->in) * m->out : 0));
            CHECK(w->head.w.size() == (kept && !c.tied_head ? std::size_t(c.vocab_size) * c.dim : 0));
            CHECK(w->tok_emb.size() == std::size_t(c.vocab_size) * c.dim);  // the embedding step reads it
            CHECK(w->layers[0].norm1_w.size() == std::size_t(c.dim));
        }
        auto toks = some_tokens(9, c.vocab_size, 2);
        auto a = make_engine(cpu_only.model, {}), b = make_engine(both.model, {});
        auto la = copy_logits(a->prefill(0, toks, Keep::all), toks.size(), c.vocab_size);
        auto lb = copy_logits(b->prefill(0, toks, Keep::all), toks.size(), c.vocab_size);
        CHECK_MESSAGE(la == lb, "releasing the rows after packing must not change a single logit");
    }
}

// A model loaded for the CUDA engine alone never packs for the CPU: a CPU
// engine on it must refuse, not run on missing panels.
TEST_CASE("engine.model.cpu_engine_refuses_a_model_loaded_for_cuda_only") {
    auto lm = load_model(kModels[0], Precision::f32, false, {.cpu = false, .cuda = true});
    CHECK(lm.model->cpu == nullptr);
    const Matrix& qkv = lm.model->w.layers[0].qkv;
    CHECK_MESSAGE(qkv.w.size() == std::size_t(qkv.in) * qkv.out, "the CUDA engine uploads these rows");
    CHECK_THROWS_AS(make_engine(lm.model, {}), UserError);
}

// A decode step of at most kSmallM rows runs as one team of threads
// (engine/team.hpp). Each output value is still computed by one thread with
// the same kernel, so the logits are those of one thread, bit for bit: for
// both families, GQA, a window, the quantized and bf16 kernels, one row and
// three, and products large enough to be split among the threads.
TEST_CASE("engine.model.decode_on_a_team_equals_one_thread") {
    const char* split = "synthetic:llama,dim=256,ffn=512,layers=2,heads=8,kv_heads=2,vocab=97,ctx=64";
    for (const char* spec : {kModels[1], kModels[3], kModels[4], split})
        for (Precision p : {Precision::f32, Precision::bf16, Precision::int8_g32, Precision::int4_g64}) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            auto lm = load_model(spec, p, false);
            const Model& m = *lm.model;
            const int V = m.config.vocab_size, B = 3;
            auto logits_at = [&](int threads) {
                const int saved = omp_get_max_threads();
                omp_set_num_threads(threads);
                if (threads > 1) REQUIRE(team_possible());
                KVCache c = make_kv_cache(m, B);
                RunState s = make_run_state(m.config, B);
                for (int b = 0; b < B; b++) prefill(m, c, s, b, some_tokens(5 + 4 * b, V, b));
                std::vector<float> all;
                std::vector<int> slots = {0, 1, 2}, next = {7, 8, 9};
                for (int step = 0; step < 4; step++) {
                    const int rows = step % 2 ? 1 : B;
                    auto got = copy_logits(decode(m, c, s, {slots.data(), std::size_t(rows)},
                                                  {next.data(), std::size_t(rows)}), rows, V);
                    all.insert(all.end(), got.begin(), got.end());
                }
                omp_set_num_threads(saved);
                return all;
            };
            const auto one = logits_at(1);
            for (int threads : {2, 3}) {
                INFO("threads " << threads);
                CHECK(logits_at(threads) == one);
            }
        }
}
