// Lab 01: how inference works. Text -> token ids -> embeddings -> one forward
// pass (every shape of one layer) -> logits -> one chosen token -> text.
//
// One function per numbered section of the handout. Sections 1-4 use the engine
// only; sections 5-6 call the functions you write in exercise.cpp (greedy,
// softmax_with_temperature, sample_top_k).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "engine/attention.hpp"
#include "engine/generate.hpp"
#include "lab_main.hpp"
#include "engine/ops.hpp"
#include "print.hpp"
#include "engine/sampler.hpp"
#include "base/timing.hpp"

using namespace pd;
using lab::quoted;
using lab::quoted_token;
using lab::shape;
namespace ex = pd::lab01;

namespace {

struct Options {
    cli::CommonOptions common;
    std::string prompt = "One day, Lily went to the";
    int steps = 8;
    float temperature = 0.8f;
    int top_k = 10;
    std::uint64_t seed = 42;
    int show = 10;
};

void check_options(const Options& o) {
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (!(o.temperature > 0.0f) || !std::isfinite(o.temperature))
        fail("--temperature must be > 0, got {} (the greedy choice, the T -> 0 limit, is shown anyway)", o.temperature);
    if (o.top_k < 1) fail("--top-k must be at least 1, got {}", o.top_k);
    if (o.show < 1) fail("--show must be at least 1, got {}", o.show);
}

// What every section reads: the options, the model and the prompt's ids.
struct Lab {
    const Options& o;
    Engine& engine;
    const Model& m;
    const Config& c;
    const Tokenizer& tok;
    std::vector<int> ids;
    int P = 0;
};

// ---- 1. Text to token ids
void text_to_ids(Lab& L, nlohmann::json& js) {
    L.ids = L.tok.encode(L.o.prompt);
    L.P = int(L.ids.size());
    if (L.P == 0) fail("the prompt is empty: give some text with --prompt");
    if (L.P + L.o.steps > L.engine.max_seq())
        fail("the prompt ({} tokens) plus --steps {} do not fit the context of {} positions", L.P, L.o.steps,
             L.engine.max_seq());
    std::printf("1. Text to token ids (tokenizer: %s)\n", L.tok.kind().c_str());
    std::printf("   %s -> P = %d tokens\n", quoted(L.o.prompt).c_str(), L.P);
    std::printf("   %5s %7s  %s\n", "pos", "id", "token text");
    for (int i = 0; i < L.P; i++) std::printf("   %5d %7d  %s\n", i, L.ids[i], quoted_token(L.tok, L.ids[i]).c_str());
    std::printf("   (the model only ever sees these integers; the text is the tokenizer's business)\n\n");
    js["prompt"] = L.o.prompt;
    js["prompt_ids"] = L.ids;
}

// ---- 2. Embeddings
void embedding(const Lab& L) {
    const Config& c = L.c;
    std::printf("2. Embedding: each id selects one row of the token embedding table %s\n",
                shape({c.vocab_size, c.dim}).c_str());
    std::printf("   x = rows of the table for the %d ids: x %s = [P, dim]\n", L.P, shape({L.P, c.dim}).c_str());
    const float* row = L.m.w.tok_emb.data() + std::size_t(L.ids[0]) * c.dim;
    std::printf("   x[0, :6] (the row of id %d) = [%.4f, %.4f, %.4f, %.4f, %.4f, %.4f, ...]\n", L.ids[0], row[0],
                row[1], row[2], row[3], row[4], row[5]);
    std::printf("   %s\n\n", c.traits().positions == Positions::rotary
                                 ? "Llama adds no position vector here: it rotates q and k by their position "
                                   "(rotary embedding) inside every layer."
                                 : "GPT-2 adds a learned position row: x[i] += pos_emb[i].");
}

// ---- 3. One layer, shape by shape. The forward pass runs on our own cache and
// run state of the host model, so that the sections can look inside: it is a
// CPU pass whatever --device says, and its times are CPU times (the output says so).
struct Forward {
    KVCache cache;
    RunState st;
    std::vector<float> logits;  // [P, vocab]
    double cold_ms = 0, prefill_ms = 0;
};

Forward run_forward(const Lab& L) {
    Forward f{make_kv_cache(L.m, 1, L.P), make_run_state(L.c, L.P), {}, 0, 0};
    // The very first pass also sets up oneDNN's kernels for these shapes (a cold start),
    // so run it once untimed, then time a second, warm pass over a fresh cache.
    double t0 = now_ms();
    prefill(L.m, f.cache, f.st, 0, L.ids, Keep::all);
    f.cold_ms = now_ms() - t0;
    kv_reset(f.cache, 0);
    t0 = now_ms();
    const float* lg = prefill(L.m, f.cache, f.st, 0, L.ids, Keep::all);
    f.prefill_ms = now_ms() - t0;
    f.logits.assign(lg, lg + std::size_t(L.P) * L.c.vocab_size);
    return f;
}

void print_layer_shapes(const Lab& L) {
    const Config& c = L.c;
    const int P = L.P, Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim, D = c.head_dim;
    const FamilyTraits& t = c.traits();
    std::printf("3. One transformer layer, shape by shape (all %d layers have the same shapes; sections 3-4\n"
                "   run the engine's CPU copy of the model, host_model(), to look inside it)\n", c.n_layers);
    struct Row {
        std::string what, symbolic, here;
    };
    std::vector<Row> rows = {
        {"x, the residual stream", "[P, dim]", shape({P, c.dim})},
        {std::string(t.norm == Norm::rmsnorm ? "RMSNorm" : "LayerNorm") + "(x)", "[P, dim]", shape({P, c.dim})},
        {"qkv = norm(x) @ W_qkv^T", "[P, q_dim + 2 kv_dim]", fmt::format("[{}, {} + 2*{} = {}]", P, Q, KV, Q + 2 * KV)},
        {"q, split into heads", "[P, n_heads, head_dim]", shape({P, c.n_heads, D})},
        {"k and v, split into heads", "[P, H_kv, head_dim]", shape({P, c.n_kv_heads, D})},
        {"K and V as cached (each)", "[B, H_kv, P, D]", shape({1, c.n_kv_heads, P, D})},
        {"scores q.k/sqrt(D), per query head", "[P, P], causal", fmt::format("{} heads x {}", c.n_heads, shape({P, P}))},
        {"attention output, heads joined", "[P, q_dim]", shape({P, Q})},
        {"x += att @ W_o^T", "[P, dim]", shape({P, c.dim})},
        {t.mlp == Mlp::swiglu ? "MLP hidden silu(gate)*up" : "MLP hidden gelu(fc)", "[P, ffn]", shape({P, F})},
        {"x += hidden @ W_down^T", "[P, dim]", shape({P, c.dim})},
        {"after the last layer: norm, head", "[P, vocab]", shape({P, c.vocab_size})},
    };
    std::printf("   %-36s %-24s %s\n", "step", "shape", "here");
    for (auto& r : rows) std::printf("   %-36s %-24s %s\n", r.what.c_str(), r.symbolic.c_str(), r.here.c_str());
    if (t.mlp == Mlp::swiglu) std::printf("   (Llama's MLP first makes gate and up side by side: [P, 2 ffn] = %s)\n",
                           shape({P, 2 * F}).c_str());
}

// The engine's own buffers (RunState) hold exactly these shapes: check them.
void check_run_state(const Lab& L, const Forward& f) {
    const Config& c = L.c;
    const std::size_t P = std::size_t(L.P), Q = std::size_t(c.q_dim()), KV = std::size_t(c.kv_dim());
    auto check_buf = [&](const char* name, std::size_t got, std::size_t want, const std::string& as) {
        bool ok = got >= want;
        std::printf("   RunState.%-8s %8zu floats >= %-24s %s\n", name, got, as.c_str(), ok ? "ok" : "MISMATCH");
        if (!ok) fail("RunState.{} is smaller than {}: the shapes above are wrong", name, as);
    };
    std::printf("   Checked against the engine's run-state buffers (sized for P = %d rows):\n", L.P);
    check_buf("x", f.st.x.size(), P * c.dim, fmt::format("P*dim = {}", P * c.dim));
    check_buf("qkv", f.st.qkv.size(), P * (Q + 2 * KV), fmt::format("P*(Q+2KV) = {}", P * (Q + 2 * KV)));
    check_buf("q", f.st.q.size(), P * Q, fmt::format("P*H*D = {}", P * Q));
    check_buf("att", f.st.att.size(), P * Q, fmt::format("P*q_dim = {}", P * Q));
    check_buf("mlp_act", f.st.mlp_act.size(), P * c.hidden_dim, fmt::format("P*ffn = {}", P * c.hidden_dim));
    check_buf("logits", f.st.logits.size(), P * c.vocab_size, fmt::format("P*vocab = {}", P * c.vocab_size));
    std::printf("   cache after prefill: %s per layer for K and again for V, %d layers\n",
                kv_shape_str(f.cache, 0).c_str(), c.n_layers);
}

// Causal attention weights of query head 0 in the last layer, recomputed from the
// engine's own q and cache (the engine never keeps the weights themselves).
void print_attention_pattern(const Lab& L, const Forward& f) {
    const Config& c = L.c;
    const int l = c.n_layers - 1, n = std::min(L.P, L.o.show), D = c.head_dim;
    std::printf("\n   Attention weights of head 0, last layer (row = query position, column = key position;\n"
                "   '.' = masked: a token never looks at later tokens). Each row sums to 1.\n");
    std::printf("   %6s", "");
    for (int j = 0; j < n; j++) std::printf(" %5d", j);
    std::printf("\n");
    std::vector<float> sc(static_cast<std::size_t>(L.P));
    for (int i = 0; i < n; i++) {
        const float* q = f.st.q.data() + std::size_t(i) * c.q_dim();  // head 0
        for (int j = 0; j <= i; j++) {
            const float* k = kv_key(f.cache, l, 0, kv_head_for(0, c.n_heads, c.n_kv_heads), j);
            double dot = 0;
            for (int d = 0; d < D; d++) dot += double(q[d]) * k[d];
            sc[std::size_t(j)] = float(dot / std::sqrt(double(D)));
        }
        softmax(sc.data(), i + 1);
        std::printf("   q%-5d", i);
        for (int j = 0; j < n; j++) {
            if (j <= i) std::printf(" %5.2f", sc[std::size_t(j)]);
            else std::printf(" %5s", ".");
        }
        std::printf("\n");
    }
    if (L.P > n) std::printf("   (first %d of %d positions; --show N prints more)\n", n, L.P);
    std::printf("\n");
}

// ---- 4. Logits
void logits_rows(const Lab& L, const Forward& f) {
    const int P = L.P, V = L.c.vocab_size;
    std::printf("4. The CPU forward pass gave logits [P, vocab] = %s in %.2f ms (CPU): one pass for all %d tokens\n"
                "   (the first, cold pass took %.2f ms (CPU): first passes also pay one-time costs, such as kernel\n"
                "   setup and cold caches, which is why measurements start with warm-up runs)\n",
                shape({P, V}).c_str(), f.prefill_ms, P, f.cold_ms);
    if (L.engine.device() != Device::cpu)
        std::printf("   (--device %s: this pass still ran on the CPU, to look inside; section 6's steps run on the\n"
                    "   %s through the engine. Lab 02 times the two devices.)\n", device_name(L.engine.device()),
                    device_name(L.engine.device()));
    std::printf("   Row i scores every vocabulary entry as the token AFTER position i:\n");
    std::printf("   %5s  %-16s %-26s %s\n", "pos", "token", "row's top guess (p)", "actual next token");
    std::vector<float> p(static_cast<std::size_t>(V));
    for (int i = 0; i < P; i++) {
        if (P > L.o.show && i == L.o.show - 1 && i < P - 1) {
            std::printf("   %5s  (positions %d..%d left out; --show N prints more)\n", "...", i, P - 2);
            i = P - 1;
        }
        std::copy_n(f.logits.data() + std::size_t(i) * V, V, p.data());
        int best = argmax(p.data(), V);
        softmax(p.data(), V);
        std::string guess = fmt::format("{} ({:.2f})", quoted_token(L.tok, best), p[std::size_t(best)]);
        std::string next = i + 1 < P ? quoted_token(L.tok, L.ids[i + 1]) : "?  <- this row picks the next token";
        std::printf("   %5d  %-16s %-26s %s\n", i, quoted_token(L.tok, L.ids[i]).c_str(), guess.c_str(), next.c_str());
    }
    std::printf("   Generation needs only the last row; the engine's prefill normally keeps just that one\n"
                "   (Keep::last): computing the head for the other %d rows is wasted work.\n\n", P - 1);
}

// ---- 5. Choosing a token: the exercise.
// The `shown` best ids of `last`, best first (ties to the lower id, as argmax).
std::vector<int> best_ids(std::span<const float> last, int shown) {
    std::vector<int> order(last.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&](int a, int b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
    order.resize(std::size_t(shown));
    return order;
}

void choose_token(const Lab& L, std::span<const float> last, nlohmann::json& js) {
    const Options& o = L.o;
    const int V = int(last.size());
    std::printf("5. Choosing the next token from the last row (your exercise)\n");
    int g = ex::greedy(last);
    int engine_g = argmax(last.data(), V);
    std::vector<float> probs = ex::softmax_with_temperature(last, 1.0f);
    std::printf("   greedy():       id %d %s, p = %.3f at T = 1   [engine argmax: %d, %s]\n", g,
                quoted_token(L.tok, g).c_str(), probs[std::size_t(g)], engine_g,
                g == engine_g ? "agrees" : "DISAGREES: check greedy()");
    std::vector<float> pt = ex::softmax_with_temperature(last, o.temperature);
    const int k = std::min(o.top_k, V), shown = std::min(k, 8);
    double in_k = 0;  // the top k's probability at T, which the sampler renormalises to 1
    for (int id : best_ids(last, k)) in_k += pt[std::size_t(id)];
    std::printf("   The %d best candidates: p at T=1, p at T=%.2f, and after keeping the top %d (renormalised)\n",
                shown, o.temperature, k);
    for (int id : best_ids(last, shown))
        std::printf("     id %6d %-16s %.3f   %.3f   %.3f\n", id, quoted_token(L.tok, id).c_str(),
                    probs[std::size_t(id)], pt[std::size_t(id)], pt[std::size_t(id)] / in_k);
    std::mt19937_64 rng(o.seed);
    int sampled = ex::sample_top_k(last, o.temperature, k, rng);
    std::printf("   sample_top_k(T=%.2f, k=%d, seed %llu): id %d %s\n\n", o.temperature, k,
                static_cast<unsigned long long>(o.seed), sampled, quoted_token(L.tok, sampled).c_str());
    js["greedy_id"] = g;
    js["greedy_agrees"] = g == engine_g;
    js["sampled_id"] = sampled;
}

// ---- 6. Back to text, and a few more tokens with the engine's decode steps.
// --steps tokens: the first from prefill's last row, each later one from one decode step.
std::vector<int> generate_with(const Lab& L, const std::function<int(std::span<const float>)>& pick) {
    std::vector<int> out;
    int slot = 0;
    L.engine.reset(slot);
    const float* l = L.engine.prefill(slot, L.ids);
    for (int i = 0; i < L.o.steps; i++) {
        int t = pick(std::span<const float>(l, std::size_t(L.c.vocab_size)));
        out.push_back(t);
        if (i + 1 < L.o.steps) l = L.engine.decode({&slot, 1}, {&t, 1});  // one token in, one row of logits out
    }
    return out;
}

void ids_to_text(const Lab& L, nlohmann::json& js) {
    const Options& o = L.o;
    const int k = std::min(o.top_k, L.c.vocab_size);
    std::printf("6. Ids back to text: one more token per step, each from a decode step over the cache\n");
    std::vector<int> greedy_ids = generate_with(L, [&](std::span<const float> l) { return ex::greedy(l); });
    std::mt19937_64 rng(o.seed);
    std::vector<int> sampled_ids =
        generate_with(L, [&](std::span<const float> l) { return ex::sample_top_k(l, o.temperature, k, rng); });
    GenerateOptions go;
    go.max_new_tokens = o.steps;
    go.stop_at_eos = false;
    std::vector<int> engine_ids = generate(L.engine, L.ids, go).generated_ids;
    std::printf("   greedy  ids [%s]\n", lab::id_list(greedy_ids).c_str());
    std::printf("   greedy  text: %s|%s\n", o.prompt.c_str(), lab::text_of(L.tok, greedy_ids).c_str());
    std::printf("           %s\n", engine_ids == greedy_ids ? "(the same tokens as the engine's own greedy generate())"
                                                            : "(DIFFERS from the engine's greedy generate(): check greedy())");
    std::printf("   sampled text: %s|%s   (T=%.2f, top-k %d, seed %llu)\n", o.prompt.c_str(),
                lab::text_of(L.tok, sampled_ids).c_str(), o.temperature, k, static_cast<unsigned long long>(o.seed));
    std::printf("   ('|' marks where the prompt ends. 1 prefill + %d decode steps made %d tokens: the first\n"
                "   token came from the prefill's last row, each later one from one decode step.)\n",
                o.steps - 1, o.steps);
    js["greedy_continuation_ids"] = greedy_ids;
    js["greedy_continuation_text"] = L.tok.decode(greedy_ids);
    js["sampled_continuation_ids"] = sampled_ids;
    js["sampled_continuation_text"] = L.tok.decode(sampled_ids);
    js["greedy_matches_engine"] = engine_ids == greedy_ids;
}

int run(const Options& o) {
    check_options(o);
    cli::Session s = cli::open_session(o.common);
    const Model& m = s.engine->host_model();
    const Config& c = m.config;
    Lab L{o, *s.engine, m, c, s.loaded.tokenizer, {}, 0};
    nlohmann::json js;
    std::printf("Lab 01: how inference works\n");
    std::printf("model %s (%s): %d layers, dim %d, %d query heads, %d KV heads, head_dim %d, MLP %d, "
                "vocabulary %d, context %d\n\n", o.common.model.c_str(), family_name(c.family), c.n_layers, c.dim,
                c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size, c.max_seq_len);
    text_to_ids(L, js);
    embedding(L);
    Forward f = run_forward(L);
    print_layer_shapes(L);
    check_run_state(L, f);
    print_attention_pattern(L, f);
    logits_rows(L, f);
    const std::size_t V = std::size_t(c.vocab_size);
    choose_token(L, std::span<const float>(f.logits.data() + std::size_t(L.P - 1) * V, V), js);
    ids_to_text(L, js);
    const int P = L.P, Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
    js["model"] = o.common.model;
    js["P"] = P;
    js["shapes"] = {{"x", {P, c.dim}}, {"qkv", {P, Q + 2 * KV}}, {"q", {P, c.n_heads, D}},
                    {"kv_cache", {1, c.n_kv_heads, P, D}}, {"scores_per_head", {P, P}}, {"mlp_hidden", {P, c.hidden_dim}},
                    {"logits", {P, c.vocab_size}}};
    lab::write_lab_json(o.common, js);
    std::printf("\n");
    return lab::finish(js.value("greedy_agrees", false) && js.value("greedy_matches_engine", false));
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{
        "Lab 01: how inference works.\n"
        "Follows one prompt through the model: text -> token ids -> embedding rows -> the layers\n"
        "(every intermediate shape of one layer, and the causal attention pattern) -> logits\n"
        "[P, vocab] -> one chosen token -> text. The last row of the logits is the only one that\n"
        "picks the next token. Sections 5 and 6 call your greedy(), softmax_with_temperature()\n"
        "and sample_top_k() from exercise.cpp; test them with\n"
        "  meson test -C build --suite track1-01",
        "01-how-inference-works"};
    cli::add_common(&app, o.common);
    app.add_option("--prompt,-p", o.prompt, "the text to run through the model")->capture_default_str();
    app.add_option("--steps,-n", o.steps, "tokens to generate in section 6 (1 from prefill, the rest from decode steps)")
        ->capture_default_str();
    app.add_option("--temperature", o.temperature,
                   "sampling temperature T > 0: logits are divided by T, so T < 1 sharpens and T > 1 flattens")
        ->capture_default_str();
    app.add_option("--top-k", o.top_k, "sample among the k most likely tokens only")->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the sampler: the same seed draws the same tokens")->capture_default_str();
    app.add_option("--show", o.show, "positions of the attention pattern to print")->capture_default_str();
    return lab::run_lab(app, argc, argv, [&] { return run(o); });
}
