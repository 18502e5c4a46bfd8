// Lab 01: how inference works. Text -> token ids -> embeddings -> one forward
// pass (every shape of one layer) -> logits -> one chosen token -> text.
//
// Sections 1-4 use the engine only; sections 5-6 call the functions you write
// in exercise.cpp (greedy, softmax_with_temperature, sample_top_k).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "attention.hpp"
#include "generate.hpp"
#include "lab_main.hpp"
#include "ops.hpp"
#include "sampler.hpp"
#include "timing.hpp"

using namespace pd;
namespace ex = pd::lab01;

namespace {

struct Options {
    lab::LabOptions common;
    std::string prompt = "One day, Lily went to the";
    int steps = 8;
    float temperature = 0.8f;
    int top_k = 10;
    std::uint64_t seed = 42;
    int show = 10;
};

// A token's bytes, printable: ASCII as is, anything else as \xNN.
std::string quoted(const std::string& bytes) {
    std::string out = "\"";
    for (unsigned char ch : bytes) {
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '"') out += "\\\"";
        else if (ch >= 0x20 && ch < 0x7f) out += char(ch);
        else out += fmt::format("\\x{:02x}", ch);
    }
    return out + "\"";
}

std::string shape(std::initializer_list<long> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

// The ids' text, always valid UTF-8 (a cut character becomes U+FFFD).
std::string text_of(const Tokenizer& tok, const std::vector<int>& ids) {
    StreamDecoder d(tok);
    std::string s;
    for (int id : ids) s += d.push(id);
    return s + d.flush();
}

int run(const Options& o) {
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (!(o.temperature > 0.0f) || !std::isfinite(o.temperature))
        fail("--temperature must be > 0, got {} (the greedy choice, the T -> 0 limit, is shown anyway)", o.temperature);
    if (o.top_k < 1) fail("--top-k must be at least 1, got {}", o.top_k);
    if (o.show < 1) fail("--show must be at least 1, got {}", o.show);
    lab::LabSession s = lab::open_lab_session(o.common);
    Engine& engine = *s.engine;
    const Model& m = engine.host_model();
    const Config& c = m.config;
    const Tokenizer& tok = s.loaded.tokenizer;
    const bool llama = c.family == Family::llama;
    nlohmann::json js;

    std::printf("Lab 01: how inference works\n");
    std::printf("model %s (%s): %d layers, dim %d, %d query heads, %d KV heads, head_dim %d, MLP %d, "
                "vocabulary %d, context %d\n\n", o.common.model.c_str(), family_name(c.family), c.n_layers, c.dim,
                c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size, c.max_seq_len);

    // ---- 1. Text to token ids
    std::vector<int> ids = tok.encode(o.prompt);
    const int P = int(ids.size());
    if (P == 0) fail("the prompt is empty: give some text with --prompt");
    if (P + o.steps > engine.max_seq())
        fail("the prompt ({} tokens) plus --steps {} do not fit the context of {} positions", P, o.steps,
             engine.max_seq());
    std::printf("1. Text to token ids (tokenizer: %s)\n", tok.kind().c_str());
    std::printf("   %s -> P = %d tokens\n", quoted(o.prompt).c_str(), P);
    std::printf("   %5s %7s  %s\n", "pos", "id", "token text");
    for (int i = 0; i < P; i++)
        std::printf("   %5d %7d  %s\n", i, ids[i], quoted(tok.token_bytes(ids[i])).c_str());
    std::printf("   (the model only ever sees these integers; the text is the tokenizer's business)\n\n");
    js["prompt"] = o.prompt;
    js["prompt_ids"] = ids;

    // ---- 2. Embeddings
    std::printf("2. Embedding: each id selects one row of the token embedding table %s\n",
                shape({c.vocab_size, c.dim}).c_str());
    std::printf("   x = rows of the table for the %d ids: x %s = [P, dim]\n", P, shape({P, c.dim}).c_str());
    {
        const float* row = m.w.tok_emb.data() + std::size_t(ids[0]) * c.dim;
        std::printf("   x[0, :6] (the row of id %d) = [%.4f, %.4f, %.4f, %.4f, %.4f, %.4f, ...]\n", ids[0], row[0],
                    row[1], row[2], row[3], row[4], row[5]);
    }
    std::printf("   %s\n\n", llama ? "Llama adds no position vector here: it rotates q and k by their position "
                                     "(rotary embedding) inside every layer."
                                   : "GPT-2 adds a learned position row: x[i] += pos_emb[i].");

    // ---- 3. One layer, shape by shape; then run the forward pass.
    // Our own cache and run state on the host model, so that we can look inside.
    KVCache cache = make_kv_cache(m, 1, P);
    RunState st = make_run_state(c, P);
    std::vector<float> logits;
    // The very first pass also sets up oneDNN's kernels for these shapes (a cold start),
    // so run it once untimed, then time a second, warm pass over a fresh cache.
    double t0 = now_ms();
    prefill(m, cache, st, 0, ids, Keep::all);
    const double cold_ms = now_ms() - t0;
    kv_reset(cache, 0);
    t0 = now_ms();
    const float* lg = prefill(m, cache, st, 0, ids, Keep::all);
    const double prefill_ms = now_ms() - t0;
    logits.assign(lg, lg + std::size_t(P) * c.vocab_size);

    const int Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim, H = c.n_heads, Hkv = c.n_kv_heads,
              D = c.head_dim, V = c.vocab_size;
    std::printf("3. One transformer layer, shape by shape (all %d layers have the same shapes)\n", c.n_layers);
    struct Row {
        std::string what, symbolic, here;
    };
    std::vector<Row> rows = {
        {"x, the residual stream", "[P, dim]", shape({P, c.dim})},
        {std::string(llama ? "RMSNorm" : "LayerNorm") + "(x)", "[P, dim]", shape({P, c.dim})},
        {"qkv = norm(x) @ W_qkv^T", "[P, q_dim + 2 kv_dim]", fmt::format("[{}, {} + 2*{} = {}]", P, Q, KV, Q + 2 * KV)},
        {"q, split into heads", "[P, n_heads, head_dim]", shape({P, H, D})},
        {"k and v, split into heads", "[P, H_kv, head_dim]", shape({P, Hkv, D})},
        {"K and V as cached (each)", "[B, H_kv, P, D]", shape({1, Hkv, P, D})},
        {"scores q.k/sqrt(D), per query head", "[P, P], causal", fmt::format("{} heads x {}", H, shape({P, P}))},
        {"attention output, heads joined", "[P, q_dim]", shape({P, Q})},
        {"x += att @ W_o^T", "[P, dim]", shape({P, c.dim})},
        {llama ? "MLP hidden silu(gate)*up" : "MLP hidden gelu(fc)", "[P, ffn]", shape({P, F})},
        {"x += hidden @ W_down^T", "[P, dim]", shape({P, c.dim})},
        {"after the last layer: norm, head", "[P, vocab]", shape({P, V})},
    };
    std::printf("   %-36s %-24s %s\n", "step", "shape", "here");
    for (auto& r : rows) std::printf("   %-36s %-24s %s\n", r.what.c_str(), r.symbolic.c_str(), r.here.c_str());
    if (llama) std::printf("   (Llama's MLP first makes gate and up side by side: [P, 2 ffn] = %s)\n",
                           shape({P, 2 * F}).c_str());

    // The engine's own buffers (RunState) hold exactly these shapes: check them.
    auto check_buf = [&](const char* name, std::size_t got, std::size_t want, const std::string& as) {
        bool ok = got >= want;
        std::printf("   RunState.%-8s %8zu floats >= %-24s %s\n", name, got, as.c_str(), ok ? "ok" : "MISMATCH");
        if (!ok) fail("RunState.{} is smaller than {}: the shapes above are wrong", name, as);
    };
    std::printf("   Checked against the engine's run-state buffers (sized for P = %d rows):\n", P);
    check_buf("x", st.x.size(), std::size_t(P) * c.dim, fmt::format("P*dim = {}", P * c.dim));
    check_buf("qkv", st.qkv.size(), std::size_t(P) * (Q + 2 * KV), fmt::format("P*(Q+2KV) = {}", P * (Q + 2 * KV)));
    check_buf("q", st.q.size(), std::size_t(P) * Q, fmt::format("P*H*D = {}", P * Q));
    check_buf("att", st.att.size(), std::size_t(P) * Q, fmt::format("P*q_dim = {}", P * Q));
    check_buf("mlp_act", st.mlp_act.size(), std::size_t(P) * F, fmt::format("P*ffn = {}", P * F));
    check_buf("logits", st.logits.size(), std::size_t(P) * V, fmt::format("P*vocab = {}", P * V));
    std::printf("   cache after prefill: %s per layer for K and again for V, %d layers\n",
                kv_shape_str(cache, 0).c_str(), c.n_layers);

    // Causal attention weights of query head 0 in the last layer, from the engine's own q and cache.
    {
        const int l = c.n_layers - 1, n = std::min(P, o.show);
        std::printf("\n   Attention weights of head 0, last layer (row = query position, column = key position;\n"
                    "   '.' = masked: a token never looks at later tokens). Each row sums to 1.\n");
        std::printf("   %6s", "");
        for (int j = 0; j < n; j++) std::printf(" %5d", j);
        std::printf("\n");
        std::vector<float> sc(static_cast<std::size_t>(P));
        for (int i = 0; i < n; i++) {
            const float* q = st.q.data() + std::size_t(i) * Q;  // head 0
            for (int j = 0; j <= i; j++) {
                const float* k = kv_key(cache, l, 0, kv_head_for(0, H, Hkv), j);
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
        if (P > n) std::printf("   (first %d of %d positions; --show N prints more)\n", n, P);
    }
    std::printf("\n");

    // ---- 4. Logits
    std::printf("4. The forward pass gave logits [P, vocab] = %s in %.2f ms: one pass for all %d tokens\n"
                "   (the first, cold pass took %.2f ms: first passes also pay one-time costs, such as kernel\n"
                "   setup and cold caches, which is why measurements start with warm-up runs)\n",
                shape({P, V}).c_str(), prefill_ms, P, cold_ms);
    std::printf("   Row i scores every vocabulary entry as the token AFTER position i:\n");
    std::printf("   %5s  %-16s %-26s %s\n", "pos", "token", "row's top guess (p)", "actual next token");
    std::vector<float> p(static_cast<std::size_t>(V));
    for (int i = 0; i < P; i++) {
        if (P > o.show && i == o.show - 1 && i < P - 1) {
            std::printf("   %5s  (positions %d..%d left out; --show N prints more)\n", "...", i, P - 2);
            i = P - 1;
        }
        std::copy_n(logits.data() + std::size_t(i) * V, V, p.data());
        int best = argmax(p.data(), V);
        softmax(p.data(), V);
        std::string guess = fmt::format("{} ({:.2f})", quoted(tok.token_bytes(best)), p[std::size_t(best)]);
        std::string next = i + 1 < P ? quoted(tok.token_bytes(ids[i + 1])) : "?  <- this row picks the next token";
        std::printf("   %5d  %-16s %-26s %s\n", i, quoted(tok.token_bytes(ids[i])).c_str(), guess.c_str(), next.c_str());
    }
    std::printf("   Generation needs only the last row; the engine's prefill normally keeps just that one\n"
                "   (Keep::last): computing the head for the other %d rows is wasted work.\n\n", P - 1);

    // ---- 5. Choosing a token: the exercise.
    std::span<const float> last(logits.data() + std::size_t(P - 1) * V, std::size_t(V));
    std::printf("5. Choosing the next token from the last row (your exercise)\n");
    int g = ex::greedy(last);
    int engine_g = argmax(last.data(), V);
    std::vector<float> probs = ex::softmax_with_temperature(last, 1.0f);
    std::printf("   greedy():       id %d %s, p = %.3f at T = 1   [engine argmax: %d, %s]\n", g,
                quoted(tok.token_bytes(g)).c_str(), probs[std::size_t(g)], engine_g,
                g == engine_g ? "agrees" : "DISAGREES: check greedy()");
    std::vector<float> pt = ex::softmax_with_temperature(last, o.temperature);
    std::vector<int> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(o.top_k, V), shown = std::min(k, 8);
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&](int a, int b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
    double in_k = 0;
    {
        std::vector<int> all(order);
        std::partial_sort(all.begin(), all.begin() + k, all.end(),
                          [&](int a, int b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
        for (int i = 0; i < k; i++) in_k += pt[std::size_t(all[std::size_t(i)])];
    }
    std::printf("   The %d best candidates: p at T=1, p at T=%.2f, and after keeping the top %d (renormalised)\n",
                shown, o.temperature, k);
    for (int i = 0; i < shown; i++) {
        int id = order[std::size_t(i)];
        std::printf("     id %6d %-16s %.3f   %.3f   %.3f\n", id, quoted(tok.token_bytes(id)).c_str(),
                    probs[std::size_t(id)], pt[std::size_t(id)], pt[std::size_t(id)] / in_k);
    }
    std::mt19937_64 rng(o.seed);
    int sampled = ex::sample_top_k(last, o.temperature, k, rng);
    std::printf("   sample_top_k(T=%.2f, k=%d, seed %llu): id %d %s\n\n", o.temperature, k,
                static_cast<unsigned long long>(o.seed), sampled, quoted(tok.token_bytes(sampled)).c_str());
    js["greedy_id"] = g;
    js["sampled_id"] = sampled;

    // ---- 6. Back to text, and a few more tokens with the engine's decode steps.
    std::printf("6. Ids back to text: one more token per step, each from a decode step over the cache\n");
    std::vector<int> greedy_ids, sampled_ids;
    auto generate_with = [&](std::vector<int>& out, const std::function<int(std::span<const float>)>& pick) {
        int slot = 0;
        engine.reset(slot);
        const float* l = engine.prefill(slot, ids);  // token 1 comes from prefill's last row
        for (int i = 0; i < o.steps; i++) {
            int t = pick(std::span<const float>(l, std::size_t(V)));
            out.push_back(t);
            if (i + 1 < o.steps) l = engine.decode({&slot, 1}, {&t, 1});  // one token in, one row of logits out
        }
    };
    generate_with(greedy_ids, [&](std::span<const float> l) { return ex::greedy(l); });
    std::mt19937_64 rng2(o.seed);
    generate_with(sampled_ids, [&](std::span<const float> l) { return ex::sample_top_k(l, o.temperature, k, rng2); });
    GenerateOptions go;
    go.max_new_tokens = o.steps;
    go.stop_at_eos = false;
    std::vector<int> engine_ids = generate(engine, ids, go).generated_ids;
    std::printf("   greedy  ids [%s]\n", fmt::format("{}", fmt::join(greedy_ids, ", ")).c_str());
    std::printf("   greedy  text: %s|%s\n", o.prompt.c_str(), text_of(tok, greedy_ids).c_str());
    std::printf("           %s\n", engine_ids == greedy_ids ? "(the same tokens as the engine's own greedy generate())"
                                                            : "(DIFFERS from the engine's greedy generate(): check greedy())");
    std::printf("   sampled text: %s|%s   (T=%.2f, top-k %d, seed %llu)\n", o.prompt.c_str(),
                text_of(tok, sampled_ids).c_str(), o.temperature, k, static_cast<unsigned long long>(o.seed));
    std::printf("   ('|' marks where the prompt ends. 1 prefill + %d decode steps made %d tokens: the first\n"
                "   token came from the prefill's last row, each later one from one decode step.)\n",
                o.steps - 1, o.steps);
    js["greedy_continuation_ids"] = greedy_ids;
    js["greedy_continuation_text"] = tok.decode(greedy_ids);
    js["sampled_continuation_ids"] = sampled_ids;
    js["sampled_continuation_text"] = tok.decode(sampled_ids);
    js["greedy_matches_engine"] = engine_ids == greedy_ids;
    js["model"] = o.common.model;
    js["P"] = P;
    js["shapes"] = {{"x", {P, c.dim}}, {"qkv", {P, Q + 2 * KV}}, {"q", {P, H, D}}, {"kv_cache", {1, Hkv, P, D}},
                    {"scores_per_head", {P, P}}, {"mlp_hidden", {P, F}}, {"logits", {P, V}}};
    lab::write_lab_json(o.common, js);
    return 0;
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
    lab::add_lab_options(app, o.common);
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
