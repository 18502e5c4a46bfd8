// Lab 15 tests: each piece of your forward pass against the engine's own
// (src/engine: rmsnorm, rope, attention_prefill, swiglu, linear_forward,
// prefill/decode), |got - ref| <= atol + rtol * |ref|; then your decoder
// layer, layer by layer and step by step, with the first layer and step that
// diverges named; then whole-model logits at every step; then greedy ids, with
// and without the cache. Each on the bundled tiny model and on a random
// Llama-family shape drawn from PDLAB_TEST_SEED (the grader's is hidden).
//   meson test -C build --suite track4-15        (all of them)
//   build/labs/track4/15-forward-pass/lab15_tests --test-case='lab15.layer.*'
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/attention.hpp"
#include "engine/matmul.hpp"
#include "engine/model.hpp"
#include "engine/ops.hpp"
#include "exercise.hpp"
#include "lab_test.hpp"
#include "load/model_source.hpp"

using namespace pd;
using pd::lab::Inputs;
using pd::lab::needs;
using pd::lab::observe;  // the values a check judged, for the grader (labs/common/observe.hpp)
namespace ex = pd::lab15;

namespace {

// One piece in f32 against the engine's SIMD twin: only the order of the sums differs.
constexpr double kPieceAtol = 1e-5, kPieceRtol = 1e-4;
// A layer or the whole model: errors of many products and sums add up.
constexpr double kModelAtol = 1e-4, kModelRtol = 1e-3;

// The first index where |got - ref| > atol + rtol |ref|, or -1.
long first_outside(const float* got, const float* ref, std::size_t n, double atol, double rtol) {
    for (std::size_t i = 0; i < n; i++)
        if (!(std::fabs(double(got[i]) - ref[i]) <= atol + rtol * std::fabs(double(ref[i])))) return long(i);
    return -1;
}

// ||got - ref|| / ||ref||: one number per layer and step for the messages.
double relative_error(const float* got, const float* ref, std::size_t n) {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < n; i++) diff += std::pow(double(got[i]) - ref[i], 2), norm += double(ref[i]) * ref[i];
    return std::sqrt(diff / std::max(norm, 1e-30));
}

// Checks got against ref; the message names `what` and the first element outside.
void check_against(const float* got, const float* ref, std::size_t n, double atol, double rtol, const std::string& what) {
    observe(what, got, n, {2 * atol, 2 * rtol});
    const long i = first_outside(got, ref, n, atol, rtol);
    if (i >= 0)
        FAIL_CHECK(fmt::format("{}: element {} is {} but the engine's is {} (relative error of the whole {:.2g}){}",
                               what, i, got[i], ref[i], relative_error(got, ref, n),
                               std::isnan(got[i]) ? "; NaN: unwritten, or a softmax without the max subtracted" : ""));
}

// A random Llama-family shape from the seed: GQA, MQA or MHA, head_dim apart
// from dim / heads, any theta; small enough that a test runs in milliseconds.
std::string random_spec(Inputs& in) {
    const int heads = std::vector<int>{2, 3, 4, 6, 8}[std::size_t(in.integer(0, 4))];
    std::vector<int> divisors;
    for (int k = 1; k <= heads; k++)
        if (heads % k == 0) divisors.push_back(k);
    const int kv_heads = divisors[std::size_t(in.integer(0, int(divisors.size()) - 1))];
    return fmt::format("synthetic:llama,dim={},ffn={},layers={},heads={},kv_heads={},head_dim={},vocab={},ctx=64,"
                       "theta={},seed={}",
                       8 * in.integer(3, 12), in.integer(20, 120), in.integer(1, 3), heads, kv_heads,
                       2 * in.integer(2, 12), in.integer(40, 300), int(in.uniform(100, 1e6)), in.integer(1, 1 << 20));
}

LoadedModel load(const std::string& spec) { return load_model(spec, Precision::f32, false); }

// The engine's ops wired as src/engine/model.cpp's forward wires them: the
// reference each layer of yours is held to. x: (rows, D), positions from
// cache.seq_len[seq]; the caller advances seq_len after the last layer.
void reference_layer(float* x, const Model& m, int l, int rows, KVCache& cache, int seq) {
    const Config& c = m.config;
    const LayerWeights& L = m.w.layers[std::size_t(l)];
    const CpuLayer& P = cpu_weights(m).layers[std::size_t(l)];
    const int D = c.dim, Q = c.q_dim(), KV = c.kv_dim(), stride = Q + 2 * KV, start = cache.seq_len[std::size_t(seq)];
    const std::size_t R = std::size_t(rows);
    std::vector<float> xn(R * D), qkv(R * stride), q(R * Q), att(R * Q), proj(R * D), gate_up(R * 2 * c.hidden_dim),
        act(R * c.hidden_dim);
    std::vector<int> pos(R);
    for (int r = 0; r < rows; r++) pos[std::size_t(r)] = start + r;
    rmsnorm(xn.data(), x, L.norm1_w.data(), rows, D, c.norm_eps);
    linear_forward(P.qkv, xn.data(), rows, qkv.data());
    rope(qkv.data(), rows, stride, c.n_heads, c.head_dim, pos.data(), cache.rope_cos.data(), cache.rope_sin.data());
    rope(qkv.data() + Q, rows, stride, c.n_kv_heads, c.head_dim, pos.data(), cache.rope_cos.data(),
         cache.rope_sin.data());
    for (std::size_t r = 0; r < R; r++) {
        kv_write(cache, l, seq, pos[r], qkv.data() + r * stride + Q, qkv.data() + r * stride + Q + KV);
        std::memcpy(q.data() + r * Q, qkv.data() + r * stride, sizeof(float) * Q);
    }
    attention_prefill(att.data(), q.data(), cache, l, seq, start, rows, c.n_heads);
    linear_forward(P.attn_out, att.data(), rows, proj.data());
    add_inplace(x, proj.data(), long(R) * D);
    rmsnorm(xn.data(), x, L.norm2_w.data(), rows, D, c.norm_eps);
    linear_forward(P.mlp_in, xn.data(), rows, gate_up.data());
    swiglu(act.data(), gate_up.data(), rows, c.hidden_dim);
    linear_forward(P.mlp_out, act.data(), rows, proj.data());
    add_inplace(x, proj.data(), long(R) * D);
}

// What a layer or logits check runs: the model, the tokens of each step (step
// 0 a prompt of 2-9 tokens, then one per decode step), and a cache for each side.
struct Sides {
    LoadedModel lm;
    std::vector<std::vector<int>> steps;
    KVCache mine, engine;

    Sides(const std::string& spec, std::uint64_t stream) : lm(load(spec)) {
        Inputs in(stream);
        const int V = lm.model->config.vocab_size;
        steps.push_back(in.tokens(in.integer(2, 9), V));
        for (int i = in.integer(2, 4); i > 0; i--) steps.push_back(in.tokens(1, V));
        mine = make_kv_cache(*lm.model, 1, 16), engine = make_kv_cache(*lm.model, 1, 16);
    }
};

std::string step_name(std::size_t step, std::size_t rows) {
    return step == 0 ? fmt::format("step 0 (prefill, {} rows)", rows) : fmt::format("step {} (decode)", step);
}

// The test's own check of reference_layer: after the last layer, the final
// norm and the head on the last row of its x must give the logits of the
// engine's forward (prefill or decode). Otherwise the test, not your code, is wrong.
void check_reference(const Model& m, const float* last_row, const float* engine_logits) {
    const Config& c = m.config;
    std::vector<float> xn(std::size_t(c.dim)), logits(std::size_t(c.vocab_size));
    rmsnorm(xn.data(), last_row, m.w.norm_f_w.data(), 1, c.dim, c.norm_eps);
    linear_forward(cpu_weights(m).head, xn.data(), 1, logits.data());
    REQUIRE_MESSAGE(first_outside(logits.data(), engine_logits, logits.size(), kModelAtol, kModelRtol) < 0,
                    "the test's reference layer disagrees with the engine's forward: a bug in the test, not in your "
                    "code; please report it");
}

// The residual stream of one step through the reference layers: xs[0] the
// embedded tokens, xs[l + 1] the output of layer l. Writes the step's K/V into
// `cache` (and advances it).
std::vector<std::vector<float>> reference_stream(const Model& m, const std::vector<int>& tokens, KVCache& cache) {
    const Config& c = m.config;
    const int rows = int(tokens.size());
    std::vector<std::vector<float>> xs(std::size_t(c.n_layers) + 1, std::vector<float>(std::size_t(rows) * c.dim));
    for (int r = 0; r < rows; r++)
        std::memcpy(xs[0].data() + std::size_t(r) * c.dim, m.w.tok_emb.data() + std::size_t(tokens[std::size_t(r)]) * c.dim,
                    sizeof(float) * c.dim);
    for (int l = 0; l < c.n_layers; l++) {
        xs[std::size_t(l) + 1] = xs[std::size_t(l)];
        reference_layer(xs[std::size_t(l) + 1].data(), m, l, rows, cache, 0);
    }
    cache.seq_len[0] += rows;
    return xs;
}

// Your decoder_layer against reference_layer on the same input, every layer of
// every step; each cache written by its own side. Fails naming the first
// layer and step outside atol + rtol, with the relative errors of every layer
// and step before it.
void check_layers(const std::string& spec, std::uint64_t stream) {
    Sides run(spec, stream);
    const Model& m = *run.lm.model;
    const Config& c = m.config;
    KVCache eng = make_kv_cache(m, 1, 16);
    RunState st = make_run_state(c, 16);
    int slot = 0;
    ex::Scratch s;
    std::string table;  // relative error per layer, one line per step
    for (std::size_t t = 0; t < run.steps.size(); t++) {
        const std::vector<int>& tokens = run.steps[t];
        const int rows = int(tokens.size());
        const auto xs = reference_stream(m, tokens, run.engine);
        check_reference(m, xs.back().data() + std::size_t(rows - 1) * c.dim,
                        t == 0 ? prefill(m, eng, st, 0, tokens) : decode(m, eng, st, {&slot, 1}, tokens));
        s.fit(c, rows, run.mine.max_seq);
        table += fmt::format("\n  {:<26}", step_name(t, tokens.size()));
        for (int l = 0; l < c.n_layers; l++) {
            std::vector<float> got = xs[std::size_t(l)];
            const std::vector<float>& want = xs[std::size_t(l) + 1];
            ex::decoder_layer(got.data(), m, l, rows, run.mine, 0, s);
            table += fmt::format(" layer {}: {:.1e}", l, relative_error(got.data(), want.data(), want.size()));
            observe(fmt::format("{} {} layer {}", spec, step_name(t, tokens.size()), l), got.data(), got.size(),
                    {2 * kModelAtol, 2 * kModelRtol});
            const long i = first_outside(got.data(), want.data(), want.size(), kModelAtol, kModelRtol);
            if (i >= 0) {
                FAIL_CHECK(fmt::format(
                    "{}: the first to diverge is layer {} at {}: x[{}] = {} but the engine's layer gives {} "
                    "(both from the same input; each side's K/V in its own cache). Relative error "
                    "||yours - engine|| / ||engine|| per layer and step:{}\n{}",
                    spec, l, step_name(t, tokens.size()), i, got[std::size_t(i)], want[std::size_t(i)], table,
                    t == 0 ? "A prefill step: check the positions (start + r), the causal limit of each row, the GQA "
                             "head map and the residuals"
                           : "The prefill agreed, a decode step does not: the K/V your earlier steps wrote, or the "
                             "position of the new row (cache.seq_len)"));
                return;
            }
        }
        run.mine.seq_len[0] += rows;
    }
    MESSAGE(fmt::format("{}: every layer of every step within {} + {} |ref|:{}", spec, kModelAtol, kModelRtol, table));
}

// Your forward's logits at every step (a prefill, then one decode step per
// token) against the engine's prefill and decode.
void check_logits(const std::string& spec, std::uint64_t stream) {
    Sides run(spec, stream);
    const Model& m = *run.lm.model;
    const Config& c = m.config;
    KVCache &mine = run.mine, &eng = run.engine;
    RunState st = make_run_state(c, 16);
    ex::Scratch s;
    int slot = 0;
    for (std::size_t t = 0; t < run.steps.size(); t++) {
        const std::vector<int>& tokens = run.steps[t];
        const float* got = ex::forward(m, mine, 0, tokens, s);
        const float* ref = t == 0 ? prefill(m, eng, st, 0, tokens) : decode(m, eng, st, {&slot, 1}, tokens);
        CHECK_MESSAGE(mine.seq_len[0] == eng.seq_len[0],
                      "after " << step_name(t, tokens.size()) << " your forward left seq_len at " << mine.seq_len[0]
                               << ", the engine at " << eng.seq_len[0]);
        check_against(got, ref, std::size_t(c.vocab_size), kModelAtol, kModelRtol,
                      fmt::format("{}: logits after {}", spec, step_name(t, tokens.size())));
    }
}

// The engine's greedy tokens: prefill, then one decode per token. `logits`
// gets each step's logits (steps, vocab), to judge a near-tie.
std::vector<int> engine_greedy(const Model& m, const std::vector<int>& prompt, int steps, std::vector<float>& logits) {
    const int V = m.config.vocab_size;
    KVCache cache = make_kv_cache(m, 1, int(prompt.size()) + steps);
    RunState st = make_run_state(m.config, 1);
    std::vector<int> out;
    int slot = 0;
    const float* l = prefill(m, cache, st, 0, prompt);
    for (int i = 0; i < steps; i++) {
        logits.insert(logits.end(), l, l + V);
        out.push_back(int(std::max_element(l, l + V) - l));
        if (i + 1 < steps) l = decode(m, cache, st, {&slot, 1}, {&out.back(), 1});
    }
    return out;
}

// Your greedy ids equal the engine's, with and without the cache. Two logits
// closer than the tolerance may order either way: a different pick there is
// a tie, and the comparison stops at it (the texts go their own ways after).
void check_generate(const std::string& spec, std::uint64_t stream) {
    Inputs in(stream);
    const LoadedModel lm = load(spec);
    const Model& m = *lm.model;
    const int V = m.config.vocab_size, steps = in.integer(6, 12);
    const std::vector<int> prompt = in.tokens(in.integer(1, 8), V);
    std::vector<float> logits;
    const std::vector<int> want = engine_greedy(m, prompt, steps, logits);
    for (bool use_cache : {true, false}) {
        const std::vector<int> got = ex::generate_greedy(m, prompt, steps, use_cache);
        const std::string what = fmt::format("{}: greedy ids {} the cache", spec, use_cache ? "with" : "without");
        REQUIRE_MESSAGE(got.size() == want.size(), what << ": " << got.size() << " ids for " << steps << " steps");
        for (std::size_t i = 0; i < got.size(); i++) {
            if (got[i] == want[i]) continue;
            const float* l = logits.data() + i * std::size_t(V);
            const bool tie = got[i] >= 0 && got[i] < V && l[got[i]] >= l[want[i]] - (kModelAtol + kModelRtol * std::fabs(l[want[i]]));
            CHECK_MESSAGE(tie, what << ": step " << i << " picked " << got[i] << " where the engine picks " << want[i]
                                    << " (engine logits " << (got[i] >= 0 && got[i] < V ? l[got[i]] : NAN) << " and "
                                    << l[want[i]] << "); the steps before agree");
            break;
        }
        observe(what, got);
    }
}

// Checks that f refuses with a pd::UserError (pd::fail), and records whether it did.
template <class F>
void check_refuses(const std::string& what, F&& f) {
    bool refused = false;
    try {
        f();
    } catch (const UserError&) {
        refused = true;
    }
    observe(what, refused);
    CHECK_MESSAGE(refused, what << ": expected a pd::UserError (pd::fail) that says what is wrong");
}

}  // namespace

TEST_CASE("lab15.rms_norm.against_the_engine") {
    needs([] { float x = 1, w = 1, o; ex::rms_norm(&o, &x, &w, 1, 1, 1e-5f); });
    Inputs in(1501);
    for (int trial = 0; trial < 6; trial++) {
        const int rows = in.integer(1, 5), dim = trial == 0 ? 1 : in.integer(2, 700);
        const float eps = float(in.uniform(1e-6, 1e-3));
        const std::vector<float> x = in.normals(std::size_t(rows) * dim, float(in.uniform(0.01, 30))),
                                 w = in.normals(std::size_t(dim));
        std::vector<float> got(x.size()), ref(x.size()), inplace = x;
        ex::rms_norm(got.data(), x.data(), w.data(), rows, dim, eps);
        rmsnorm(ref.data(), x.data(), w.data(), rows, dim, eps);
        check_against(got.data(), ref.data(), got.size(), kPieceAtol, kPieceRtol,
                      fmt::format("rms_norm of {} rows of {} (eps {:.1e})", rows, dim, eps));
        ex::rms_norm(inplace.data(), inplace.data(), w.data(), rows, dim, eps);
        check_against(inplace.data(), ref.data(), got.size(), kPieceAtol, kPieceRtol,
                      fmt::format("rms_norm in place (out == x), {} rows of {}", rows, dim));
    }
}

TEST_CASE("lab15.rope.against_the_engine") {
    Inputs in(1502);
    for (int trial = 0; trial < 6; trial++) {
        const int heads = in.integer(1, 6), Dh = 2 * in.integer(1, 40), max_seq = in.integer(1, 300);
        const int pos = trial == 0 ? 0 : in.integer(0, max_seq - 1);
        KVCache cache = make_kv_cache(1, 1, 1, max_seq, Dh);
        cache.rope_cos.resize(std::size_t(max_seq) * (Dh / 2)), cache.rope_sin.resize(cache.rope_cos.size());
        rope_tables(cache.rope_cos.data(), cache.rope_sin.data(), max_seq, Dh, float(in.uniform(100, 1e6)));
        const std::vector<float> x = in.normals(std::size_t(heads) * Dh);
        std::vector<float> got = x, ref = x;
        if (trial == 0) needs([&] { ex::apply_rope(got.data(), heads, Dh, pos, cache); });
        got = x;
        ex::apply_rope(got.data(), heads, Dh, pos, cache);
        rope(ref.data(), 1, heads * Dh, heads, Dh, &pos, cache.rope_cos.data(), cache.rope_sin.data());
        check_against(got.data(), ref.data(), got.size(), kPieceAtol, kPieceRtol,
                      fmt::format("apply_rope of {} heads of {} at position {}{}", heads, Dh, pos,
                                  pos == 0 ? " (angle 0: x unchanged)" : ""));
    }
}

TEST_CASE("lab15.attend.against_the_engine") {
    Inputs in(1503);
    for (int trial = 0; trial < 8; trial++) {
        const int kv_heads = in.integer(1, 3), heads = kv_heads * in.integer(1, 4), Dh = in.integer(1, 40);
        const int layers = 2, max_seq = in.integer(1, 200), layer = in.integer(0, 1), seq = in.integer(0, 1);
        const int pos = trial == 0 ? 0 : in.integer(0, max_seq - 1);
        KVCache cache = make_kv_cache(layers, 2, kv_heads, max_seq, Dh);
        cache.k = in.normals(cache.k.size()), cache.v = in.normals(cache.v.size());
        // Trial 1 and on: some scores near 100 and more apart, as trained models have.
        const std::vector<float> q = in.normals(std::size_t(heads) * Dh, trial % 2 ? 10.0f : 1.0f);
        std::vector<float> got(q.size(), NAN), ref(q.size()), scores(std::size_t(max_seq) + 1);
        const float guard = scores[std::size_t(pos) + 1] = 777.0f;
        if (trial == 0) needs([&] { ex::attend(got.data(), q.data(), cache, layer, seq, pos, heads, scores.data()); });
        ex::attend(got.data(), q.data(), cache, layer, seq, pos, heads, scores.data());
        attention_prefill(ref.data(), q.data(), cache, layer, seq, pos, 1, heads);
        check_against(got.data(), ref.data(), got.size(), kPieceAtol, kPieceRtol,
                      fmt::format("attend: {} query heads over {} KV heads of {}, position {}, layer {}, sequence {}",
                                  heads, kv_heads, Dh, pos, layer, seq));
        CHECK_MESSAGE(scores[std::size_t(pos) + 1] == guard,
                      "attend wrote scores past position " << pos << ": the row at position pos sees 0..pos only");
    }
}

TEST_CASE("lab15.mlp.against_the_engine") {
    Inputs in(1504);
    const LoadedModel lm = load(random_spec(in));
    const Model& m = *lm.model;
    const Config& c = m.config;
    const int rows = in.integer(1, 20), layer = in.integer(0, c.n_layers - 1);
    const std::vector<float> xn = in.normals(std::size_t(rows) * c.dim);
    ex::Scratch s;
    s.fit(c, rows, 1);
    std::vector<float> got(std::size_t(rows) * c.dim, NAN), ref(got.size()), gate_up(std::size_t(rows) * 2 * c.hidden_dim),
        act(std::size_t(rows) * c.hidden_dim);
    needs([&] { ex::swiglu_mlp(got.data(), xn.data(), m, layer, rows, s); });
    ex::swiglu_mlp(got.data(), xn.data(), m, layer, rows, s);
    const CpuLayer& P = cpu_weights(m).layers[std::size_t(layer)];
    linear_forward(P.mlp_in, xn.data(), rows, gate_up.data());
    swiglu(act.data(), gate_up.data(), rows, c.hidden_dim);
    linear_forward(P.mlp_out, act.data(), rows, ref.data());
    check_against(got.data(), ref.data(), got.size(), kPieceAtol, kPieceRtol,
                  fmt::format("swiglu_mlp of layer {} on {} rows of {}: {}", layer, rows, c.dim, c.name));
}

TEST_CASE("lab15.layer.tiny_layer_by_layer") {
    needs([] {
        const LoadedModel lm = load("synthetic:llama,dim=8,ffn=8,layers=1,heads=2,kv_heads=1,vocab=4,ctx=4");
        KVCache cache = make_kv_cache(*lm.model, 1);
        ex::Scratch s;
        s.fit(lm.model->config, 1, cache.max_seq);
        ex::decoder_layer(s.x.data(), *lm.model, 0, 1, cache, 0, s);
    });
    check_layers("tiny", 1505);
}

TEST_CASE("lab15.layer.random_shape_layer_by_layer") {
    Inputs in(1506);
    check_layers(random_spec(in), 1507);
}

TEST_CASE("lab15.forward.tiny_logits_every_step") {
    check_logits("tiny", 1508);
}

TEST_CASE("lab15.forward.random_shape_logits_every_step") {
    Inputs in(1509);
    check_logits(random_spec(in), 1510);
}

TEST_CASE("lab15.generate.tiny_with_and_without_cache") {
    check_generate("tiny", 1511);
}

TEST_CASE("lab15.generate.random_shape_with_and_without_cache") {
    Inputs in(1512);
    check_generate(random_spec(in), 1513);
}

TEST_CASE("lab15.refuse.bad_input_and_other_families") {
    const LoadedModel lm = load("synthetic:llama,dim=16,ffn=16,layers=1,heads=2,kv_heads=1,vocab=10,ctx=8");
    const Model& m = *lm.model;
    KVCache cache = make_kv_cache(m, 1);
    ex::Scratch s;
    const std::vector<int> bad_id = {3, 10}, too_many(9, 1), one = {1};
    needs([&] { ex::forward(m, cache, 0, one, s); });
    cache.seq_len[0] = 0;
    check_refuses("forward of id 10 with a vocabulary of 10", [&] { ex::forward(m, cache, 0, bad_id, s); });
    check_refuses("forward of no tokens", [&] { ex::forward(m, cache, 0, {}, s); });
    check_refuses("forward into sequence 1 of a one-sequence cache", [&] { ex::forward(m, cache, 1, one, s); });
    check_refuses("forward of 9 tokens into a cache of 8 positions", [&] { ex::forward(m, cache, 0, too_many, s); });
    observe("seq_len after the refused calls", cache.seq_len[0]);
    CHECK_MESSAGE(cache.seq_len[0] == 0, "a refused forward advanced seq_len to " << cache.seq_len[0]);
    check_refuses("generate_greedy of an empty prompt", [&] { ex::generate_greedy(m, {}, 3, true); });
    check_refuses("generate_greedy of 1 + 8 tokens with a context of 8", [&] { ex::generate_greedy(m, one, 8, true); });
    for (const char* other : {"synthetic:gpt2,dim=16,ffn=16,layers=1,heads=2,vocab=10,ctx=8",
                              "synthetic:llama,dim=16,ffn=16,layers=1,heads=2,kv_heads=1,vocab=10,ctx=8,window=4"}) {
        const LoadedModel o = load(other);
        KVCache oc = make_kv_cache(*o.model, 1);
        check_refuses(fmt::format("forward on {}, which this lab does not implement (computing something else "
                                  "would be a silent wrong answer)", other),
                      [&] { ex::forward(*o.model, oc, 0, one, s); });
    }
}

TEST_CASE("lab15.seed.another_seed_gives_other_inputs") {
    Inputs a(1506), b(1506, pd::lab::env_test_seed() + 1);
    CHECK_MESSAGE(random_spec(a) != random_spec(b), "two seeds gave the same model shape");
}
