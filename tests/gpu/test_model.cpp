// gpu.model: the whole model on the GPU against the CPU engine, through the
// device seam (make_engine with Device::cuda vs Device::cpu): logits of
// prefill (every position), of decode steps, of chunked prefill and batched
// decode, and the greedy token ids of generate(); the paged serving engine
// on both devices (mixed steps, a shared prefix); the Scheduler's speculative
// decoding on the CUDA serving engines against plain decoding. Needs a GPU.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/engine_settings.hpp"
#include "engine/generate.hpp"
#include "engine/sampler.hpp"
#include "load/model_source.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/replay.hpp"
#include "serve/scheduler.hpp"
#include "serve/slot_serving_engine.hpp"

using namespace pd;
using namespace pd::test;

namespace {

// Small models of both families and all three attention kinds.
const char* kModels[] = {
    "synthetic:llama,dim=128,ffn=256,layers=2,heads=8,kv_heads=2,vocab=211,ctx=128",          // GQA 4
    "synthetic:llama,dim=128,ffn=256,layers=2,heads=8,kv_heads=1,vocab=211,ctx=128",          // MQA
    "synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=4,vocab=97,ctx=64,tied=0",       // MHA
    "synthetic:gpt2,dim=128,ffn=512,layers=2,heads=4,vocab=211,ctx=128",                      // GPT-2
};

// Both engines run on each model: it keeps its row-major matrices for the
// CUDA engine's upload next to the CPU's packed copy (weights.hpp).
const Backends kBoth{.cpu = true, .cuda = true};

// Logit tolerances: f32 differs only in summation order; bf16 and int8 round
// the activations to bf16 before every product on the GPU, the CPU's decode
// does not (int8 there rounds x to int16 per group, 2^-16 of its largest).
float tol_for(Precision p) { return p == Precision::f32 ? 2e-3f : 6e-2f; }

// int8 on the GPU against the CPU's int8: the same quantized weights (both
// call quantize_rows), decode on the int8 GEMV, prefill on cuBLAS with the
// weights dequantized to bf16 as the CPU's oneDNN prefill has them. Chunks of
// 7 and 13 tokens run the CPU's int8 decode kernel (M <= 16) but the GPU's
// cuBLAS (M > 4): the bf16 copy's rounding is within the bf16 tolerance.
const Precision kPrecisions[] = {Precision::f32, Precision::bf16, Precision::int8_g64};

std::vector<int> some_tokens(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; i++) t[i] = (i * 37 + seed * 11 + 5) % vocab;
    return t;
}

std::vector<float> copy(const float* p, std::size_t rows, int V) { return {p, p + rows * V}; }

struct Pair {
    std::unique_ptr<Engine> cpu, gpu;
};

// The engines on both devices, with the settings the environment gives (as
// pdlab's start-up reads them: EnvSetting below sets them for a test).
Pair engines(const std::shared_ptr<const Model>& m, int batch, int max_seq = 0) {
    EngineOptions o;
    o.batch = batch;
    o.max_seq = max_seq;
    o.cuda = engine_settings_from_env().cuda;
    Pair p;
    o.device = Device::cpu;
    p.cpu = make_engine(m, o);
    o.device = Device::cuda;
    p.gpu = make_engine(m, o);
    return p;
}

// Sets an environment variable (PDLAB_CUDA_GRAPHS, PDLAB_CUDA_KV, ...) for
// the engines made while it lives: engines() and the paged serving engine read it.
struct EnvSetting {
    EnvSetting(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
    ~EnvSetting() { unsetenv(name_); }
    EnvSetting(const EnvSetting&) = delete;
    EnvSetting& operator=(const EnvSetting&) = delete;

private:
    const char* name_;
};

// top-1 minus top-2 logit: how far a greedy choice is from a tie.
float margin(const float* logits, int V) {
    float a = -1e30f, b = -1e30f;
    for (int i = 0; i < V; i++) {
        if (logits[i] > a) b = a, a = logits[i];
        else if (logits[i] > b) b = logits[i];
    }
    return a - b;
}

// Two runs' greedy ids of one prompt must be identical; a divergence is
// accepted only at a step where the referee's (the CPU's) top two logits are
// closer than `tol` (a near tie that rounding may break either way), and the
// comparison stops there: past it the two runs continue different texts.
void check_ids_up_to_a_near_tie(Engine& referee, const std::vector<int>& prompt, const std::vector<int>& want,
                                const std::vector<int>& got, float tol) {
    REQUIRE(want.size() == got.size());
    for (std::size_t i = 0; i < want.size(); i++) {
        if (want[i] == got[i]) continue;
        // Replay the referee to the diverging step and measure its margin there.
        std::vector<int> seq = prompt;
        seq.insert(seq.end(), want.begin(), want.begin() + long(i));
        referee.reset(0);
        const int V = referee.config().vocab_size;
        const float* all = referee.prefill(0, seq, Keep::all);
        const float m = margin(all + (seq.size() - 1) * std::size_t(V), V);
        INFO(fmt::format("greedy ids diverge at step {}: {} against {}; the referee's top-2 margin {}", i, want[i],
                         got[i], m));
        CHECK(m < tol);
        if (m < tol) MESSAGE("near tie at step " << i << " (margin " << m << "): accepted");
        return;
    }
}

// generate()'s greedy ids on the GPU against the CPU's (the referee).
void check_greedy(Engine& cpu, Engine& gpu, const std::vector<int>& prompt, int n, float tol) {
    GenerateOptions g;
    g.max_new_tokens = n;
    g.stop_at_eos = false;
    auto rc = generate(cpu, prompt, g);
    auto rg = generate(gpu, prompt, g);
    check_ids_up_to_a_near_tie(cpu, prompt, rc.generated_ids, rg.generated_ids, tol);
}

// Logits of the GPU and the CPU engine on one model: prefill (every
// position), decode steps, a second sequence prefilled in chunks, and both
// decoded together.
void check_logits_match(const char* spec, Precision p) {
    auto lm = load_model(spec, p, false, kBoth);
    const int V = lm.model->config.vocab_size, T = 20;
    const float tol = tol_for(p);
    Pair e = engines(lm.model, 2);
    auto toks = some_tokens(T, V, 1);
    auto cpu_all = copy(e.cpu->prefill(0, toks, Keep::all), T, V);
    auto gpu_all = copy(e.gpu->prefill(0, toks, Keep::all), T, V);
    check_close(gpu_all, cpu_all, tol, tol, "prefill logits, every position");
    CHECK(e.gpu->cache_len(0) == T);

    // Decode steps, then a second sequence prefilled in chunks (7 + 13
    // tokens, continuing its cache) and both decoded together.
    int slot0 = 0;
    for (int i = 0; i < 6; i++) {
        int tok = (i * 13 + 3) % V;
        auto c = copy(e.cpu->decode({&slot0, 1}, {&tok, 1}), 1, V);
        auto g = copy(e.gpu->decode({&slot0, 1}, {&tok, 1}), 1, V);
        check_close(g, c, tol, tol, fmt::format("decode step {}", i));
    }
    auto toks2 = some_tokens(20, V, 2);
    for (auto [a, n] : {std::pair{0, 7}, std::pair{7, 13}}) {
        auto c = copy(e.cpu->prefill(1, {toks2.data() + a, std::size_t(n)}), 1, V);
        auto g = copy(e.gpu->prefill(1, {toks2.data() + a, std::size_t(n)}), 1, V);
        check_close(g, c, tol, tol, fmt::format("chunked prefill, chunk at {}", a));
    }
    std::vector<int> slots = {1, 0}, next = {5, 9};
    for (int i = 0; i < 4; i++) {
        auto c = copy(e.cpu->decode(slots, next), 2, V);
        auto g = copy(e.gpu->decode(slots, next), 2, V);
        check_close(g, c, tol, tol, fmt::format("batched decode step {}", i));
    }
    CHECK(e.gpu->cache_len(0) == T + 6 + 4);
    CHECK(e.gpu->cache_len(1) == 20 + 4);
}

// The paged serving engine on both devices, driven by one script: a prompt
// in two chunks, a second request sharing its first two blocks (a prefix
// hit, the shared block read by both), then mixed steps in which one
// sequence brings a chunk while the other decodes, and decode steps of
// both. Block size 8: lengths end mid-block. Each step's next tokens come
// from the CPU's logits and go to both engines.
void check_paged_serving_matches(const char* spec, Precision p) {
    auto lm = load_model(spec, p, false, kBoth);
    const int V = lm.model->config.vocab_size;
    const float tol = tol_for(p);
    serve::PagedOptions o;
    o.block_size = 8;
    o.total_blocks = 40;
    auto cpu = serve::make_paged_serving_engine(lm.model, o);
    o.device = Device::cuda;
    auto gpu = serve::make_paged_serving_engine(lm.model, o);
    auto step = [&](std::vector<serve::SeqWork> work, int n_logits, const std::string& what) {
        for (const serve::SeqWork& w : work) {
            const int len = cpu->cached_len(w.seq) + int(w.tokens.size());
            REQUIRE(cpu->reserve(w.seq, len));
            REQUIRE(gpu->reserve(w.seq, len));
        }
        auto c = copy(cpu->step(work), n_logits, V);
        auto g = copy(gpu->step(work), n_logits, V);
        if (n_logits > 0) check_close(g, c, tol, tol, what);
        return c;
    };
    auto argmax = [&](const std::vector<float>& l, int row) {
        return int(std::max_element(l.begin() + std::size_t(row) * V, l.begin() + std::size_t(row + 1) * V) -
                   (l.begin() + std::size_t(row) * V));
    };
    auto a = some_tokens(21, V, 4);
    CHECK(cpu->open(0, a) == 0);
    CHECK(gpu->open(0, a) == 0);
    step({{0, {a.data(), 13}, false}}, 0, "prompt's first chunk, no logits");
    auto l = step({{0, {a.data() + 13, 8}, true}}, 1, "prompt's second chunk");
    // The second prompt starts with a's first 16 tokens: two cached blocks.
    auto b = a;
    b.resize(16);
    for (int t : some_tokens(11, V, 5)) b.push_back(t);
    CHECK(cpu->open(1, b) == 16);
    CHECK(gpu->open(1, b) == 16);
    std::vector<int> next0 = {argmax(l, 0)};
    l = step({{1, {b.data() + 16, 6}, false}, {0, next0, true}}, 1, "mixed: chunk without logits + decode");
    next0 = {argmax(l, 0)};
    l = step({{0, next0, true}, {1, {b.data() + 22, 5}, true}}, 2, "mixed: decode + last chunk");
    std::vector<int> next1 = {argmax(l, 1)};
    next0 = {argmax(l, 0)};
    for (int i = 0; i < 5; i++) {
        l = step({{1, next1, true}, {0, next0, true}}, 2, fmt::format("decode step {}", i));
        next1 = {argmax(l, 0)}, next0 = {argmax(l, 1)};
    }
    CHECK(gpu->cached_len(0) == cpu->cached_len(0));
    CHECK(gpu->cached_len(1) == 27 + 5);
    CHECK(gpu->free_blocks() == cpu->free_blocks());
    gpu->close(0), cpu->close(0);
    gpu->close(1), cpu->close(1);
}

// What one serving run of some requests through the Scheduler gave.
struct ServedRun {
    std::map<int, std::vector<int>> ids;  // by request: its greedy ids
    int steps = 0;                        // engine steps
    long long preemptions = 0;
    serve::SpeculationStats spec;
};

// Serves `rs` to the end on `engine` (2 sequences, 64 rows a step, ignoring
// EOS; the CPU's serve.scheduler.tiny_model_speculation_saves_steps's
// settings) with up to k proposed tokens a decode row; every block must be
// back at the end, the rows of rejected proposals' too.
ServedRun serve_to_the_end(serve::ServingEngine& engine, const std::vector<serve::Request>& rs, int k) {
    serve::CountingServingEngine counted(engine);
    serve::ContinuousBatching policy;
    serve::SchedulerConfig c;
    c.limits = {2, 64, false};
    c.max_model_len = 256;
    c.ignore_eos = true;
    c.speculative = {k, 3, 1};
    serve::Scheduler s(counted, policy, c);
    for (const serve::Request& r : rs) s.add(r);
    ServedRun out;
    for (; !s.idle() && out.steps < 1000; out.steps++)
        for (const serve::TokenEvent& e : s.step()) out.ids[e.request].push_back(e.token);
    REQUIRE_MESSAGE(s.idle(), "the requests should be served within 1000 steps");
    out.preemptions = counted.counters().opens - long(rs.size());
    out.spec = s.speculation();
    CHECK_MESSAGE(engine.free_blocks() == engine.total_blocks(),
                  "every block should be free (or parked) at the end, the rows of rejected proposals' too");
    return out;
}

}  // namespace

TEST_CASE("gpu.model.prefill_and_decode_logits_match_cpu") {
    for (const char* spec : kModels)
        for (Precision p : kPrecisions) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            check_logits_match(spec, p);
        }
}

// bf16 and int8 models prefill on cuBLAS by default; the flash kernel
// (PDLAB_CUDA_FLASH=1) rounds q, K and V to bf16 and must stay within the
// same tolerance, logits and greedy ids.
TEST_CASE("gpu.model.flash_prefill_matches_cpu") {
    EnvSetting flash("PDLAB_CUDA_FLASH", "1");
    for (const char* spec : kModels)
        for (Precision p : {Precision::bf16, Precision::int8_g64}) {
            INFO(spec << " " << std::string(precision_name(p)));
            check_logits_match(spec, p);
            auto lm = load_model(spec, p, false, kBoth);
            Pair e = engines(lm.model, 1);
            check_greedy(*e.cpu, *e.gpu, some_tokens(9, lm.model->config.vocab_size, 3), 40, tol_for(p));
        }
}

TEST_CASE("gpu.model.paged_serving_matches_cpu") {
    for (const char* spec : kModels)
        for (Precision p : {Precision::f32, Precision::bf16}) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            check_paged_serving_matches(spec, p);
        }
}
// Speculation on the CUDA serving engines: the Scheduler's verify items (a
// decode row and up to 4 proposed tokens, logits on every row, the rejected
// rows cut back by truncate) through the paged engine (rows through the block
// tables; a pool of 20 blocks also preempts) and the slot engine (a verify
// item is a prefill continuing the slot's cache and keeping every row's
// logits). Past its end of text the tiny model tells its story again, so many
// proposals are kept. Against the same engine without speculation: the same
// ids, every block back, a fifth fewer steps at least (the CPU's engines take
// 151 against 220). The ids may legitimately part at a near tie: a verify
// step's up to 10 rows run the products on cuBLAS where 2 plain decode rows
// run the GEMV (bf16), or cuBLAS at another shape (f32), and the sums'
// different order moves the logits a little; so a divergence is accepted
// where the CPU's top two logits are within the precision's tolerance, and
// the ids are compared up to it.
TEST_CASE("gpu.model.speculative_serving_matches_plain") {
    for (Precision p : {Precision::f32, Precision::bf16}) {
        auto lm = load_model("tiny", p, false, kBoth);
        std::vector<serve::Request> rs;
        for (const char* text : {"Once upon a time", "The little dog"})
            rs.push_back({int(rs.size()), lm.tokenizer.encode(text), 220, {}});
        auto referee = make_engine(lm.model, {Device::cpu, 1, 0});
        auto check = [&](serve::ServingEngine& engine, const std::string& what, bool preempts) {
            const ServedRun plain = serve_to_the_end(engine, rs, 0), spec = serve_to_the_end(engine, rs, 4);
            INFO(what << ", " << std::string(precision_name(p)) << ": " << spec.steps
                 << " steps with 4 proposed tokens a row against " << plain.steps << " without; "
                 << spec.spec.accepted << " of " << spec.spec.proposed << " proposed accepted; " << spec.preemptions
                 << " preemptions");
            for (const serve::Request& r : rs) {
                INFO("request " << r.id);
                check_ids_up_to_a_near_tie(*referee, r.prompt, plain.ids.at(r.id), spec.ids.at(r.id), tol_for(p));
            }
            CHECK(spec.spec.accepted > 0);
            if (preempts) CHECK_MESSAGE(spec.preemptions > 0, "20 blocks of 16 were meant to force a preemption");
            else CHECK(spec.steps < plain.steps * 4 / 5);
        };
        for (const int blocks : {32, 20}) {
            serve::PagedOptions o;
            o.total_blocks = blocks;
            o.device = Device::cuda;
            auto paged = serve::make_paged_serving_engine(lm.model, o);
            check(*paged, fmt::format("paged engine, {} blocks of 16", blocks), blocks == 20);
        }
        auto engine = make_engine(lm.model, {Device::cuda, 2, 256});
        serve::SlotServingEngine slot(*engine, 16);
        check(slot, "slot engine", false);
    }
}

// PDLAB_CUDA_KV=bf16: the cache in bf16, read by the flash prefill and the
// decode kernel, for the weights it serves (bf16 and int8; the paged engine
// in bf16, as above), contiguous and paged, against the CPU's f32 cache.
// Within the bf16 tolerance: these models already round every product's
// input (and the flash prefill its q, K and V) to bf16, and rounding the
// cached K and V too moves a score by about 2^-9 of its size, well inside
// the 6e-2 those roundings allow. Greedy ids as elsewhere (a divergence only
// at a near tie).
TEST_CASE("gpu.model.bf16_kv_cache_matches_cpu") {
    EnvSetting kv("PDLAB_CUDA_KV", "bf16");
    for (const char* spec : kModels)
        for (Precision p : {Precision::bf16, Precision::int8_g64}) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            check_logits_match(spec, p);
            if (p == Precision::bf16) check_paged_serving_matches(spec, p);  // the paged engine's weights above
            auto lm = load_model(spec, p, false, kBoth);
            Pair e = engines(lm.model, 1);
            CHECK(e.gpu->timing_method().find("bf16 K/V") != std::string::npos);
            check_greedy(*e.cpu, *e.gpu, some_tokens(9, lm.model->config.vocab_size, 3), 40, tol_for(p));
        }
}

// What a bf16 cache (PDLAB_CUDA_KV=bf16) cannot serve is refused with one
// clear message (UserError: pdlab exits 2); values the variables do not know
// are refused where they are read (engine.settings.refusals).
TEST_CASE("gpu.model.bf16_kv_cache_refusals") {
    auto f32_model = load_model(kModels[0], Precision::f32, false, kBoth);
    auto bf16_model = load_model(kModels[0], Precision::bf16, false, kBoth);
    EngineOptions o;
    o.device = Device::cuda;
    o.cuda.kv = KvPrecision::bf16;
    CHECK_THROWS_WITH_AS(make_engine(f32_model.model, o), doctest::Contains("needs bf16 or int8 weights"), UserError);
    o.cuda.flash = CudaSettings::Flash::off;
    CHECK_THROWS_WITH_AS(make_engine(bf16_model.model, o), doctest::Contains("needs the flash prefill"), UserError);
}

TEST_CASE("gpu.model.greedy_ids_match_cpu") {
    for (bool graphs : {true, false}) {
        EnvSetting setting("PDLAB_CUDA_GRAPHS", graphs ? "1" : "0");
        for (const char* spec : kModels)
            for (Precision p : kPrecisions) {
                INFO(std::string(spec) << " " << std::string(precision_name(p)) << " graphs " << graphs);
                auto lm = load_model(spec, p, false, kBoth);
                Pair e = engines(lm.model, 1);
                check_greedy(*e.cpu, *e.gpu, some_tokens(9, lm.model->config.vocab_size, 3), 40, tol_for(p));
            }
    }
}

// The real shapes: GPT-2 small and the kit's Llama yardstick (GQA 3); int8
// with groups of 128 here (64 above).
TEST_CASE("gpu.model.preset_shapes") {
    for (const char* spec : {"synthetic:bench-llama-125m", "synthetic:gpt2-124m"})
        for (Precision p : {Precision::f32, Precision::bf16, Precision::int8_g128}) {
            INFO(std::string(spec) << " " << std::string(precision_name(p)));
            auto lm = load_model(spec, p, false, kBoth);
            const int V = lm.model->config.vocab_size;
            Pair e = engines(lm.model, 1, 256);
            auto prompt = some_tokens(64, V, 4);
            auto c = copy(e.cpu->prefill(0, prompt), 1, V);
            auto g = copy(e.gpu->prefill(0, prompt), 1, V);
            check_close(g, c, tol_for(p), tol_for(p), "prefill logits of the last position");
            e.cpu->reset(0);
            e.gpu->reset(0);
            check_greedy(*e.cpu, *e.gpu, prompt, 8, tol_for(p));
        }
}

// decode_greedy's argmax on the device against the argmax of decode()'s
// logits, on two GPU engines fed the same tokens (batch of 2: a row each).
TEST_CASE("gpu.model.decode_greedy_is_the_argmax_of_the_logits") {
    for (Precision p : kPrecisions) {
        INFO(std::string(precision_name(p)));
        auto lm = load_model(kModels[0], p, false, kBoth);
        const int V = lm.model->config.vocab_size;
        EngineOptions o;
        o.device = Device::cuda;
        o.batch = 2;
        auto a = make_engine(lm.model, o), b = make_engine(lm.model, o);
        std::vector<int> slots = {0, 1}, tokens = {3, 7}, next(2);
        for (int s : slots)
            for (Engine* e : {a.get(), b.get()}) e->prefill(s, some_tokens(5 + s, V, s));
        for (int step = 0; step < 8; step++) {
            const float* logits = a->decode(slots, tokens);
            const std::vector<int> want = {argmax(logits, V), argmax(logits + V, V)};
            b->decode_greedy(slots, tokens, next);
            CHECK(next == want);
            tokens = want;
        }
        CHECK(b->cache_len(1) == 6 + 8);
    }
}

TEST_CASE("gpu.model.errors_match_cpu") {
    auto lm = load_model(kModels[0], Precision::f32, false, kBoth);
    Pair e = engines(lm.model, 1, 32);
    for (Engine* en : {e.cpu.get(), e.gpu.get()}) {
        INFO(device_name(en->device()));
        std::vector<int> bad = {1, 100000};
        CHECK_THROWS_AS(en->prefill(0, bad), UserError);
        int slot = 0, tok = 1;
        CHECK_THROWS_AS(en->decode({&slot, 1}, {&tok, 1}), UserError);  // before any prefill
        CHECK_THROWS_AS(en->prefill(0, some_tokens(33, 211, 5)), UserError);  // longer than max_seq 32
        CHECK_THROWS_AS(en->prefill(1, some_tokens(3, 211, 5)), UserError);   // no slot 1
        CHECK_THROWS_AS(en->reset(1), UserError);
        en->prefill(0, some_tokens(3, 211, 5));
        std::vector<int> twice = {0, 0}, next = {1, 2};
        CHECK_THROWS_WITH_AS(en->decode(twice, next), doctest::Contains("appears twice"), UserError);
        CHECK(en->cache_len(0) == 3);
    }
}

TEST_CASE("gpu.model.timing") {
    auto lm = load_model(kModels[0], Precision::bf16, false, kBoth);
    Pair e = engines(lm.model, 1);
    auto toks = some_tokens(50, lm.model->config.vocab_size, 6);
    double ms = e.gpu->time_ms([&] { e.gpu->prefill(0, toks); });
    CHECK(ms > 0);
    CHECK(e.gpu->timing_method().find("cudaEventSynchronize") != std::string::npos);
    CHECK(e.gpu->hardware().find("SMs") != std::string::npos);
    CHECK(e.gpu->device() == Device::cuda);
}

// A model loaded for the CPU alone released its rows once packed: the CUDA
// engine has nothing to upload and must say so, not upload empty vectors.
TEST_CASE("gpu.model.refuses_a_model_loaded_for_the_cpu_only") {
    auto lm = load_model(kModels[0], Precision::f32, false);  // Backends{}: the CPU only
    EngineOptions o;
    o.device = Device::cuda;
    try {
        make_engine(lm.model, o);
        FAIL("make_engine(cuda) built an engine on a model whose row-major matrices were released");
    } catch (const UserError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("loaded for the CPU only") != std::string::npos);
    }
}
