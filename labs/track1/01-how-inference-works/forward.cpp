// Lab 01, sections 2 to 4: the embedding, one layer shape by shape on the
// host model's CPU pass, and the logits it gives.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "base/timing.hpp"
#include "engine/attention.hpp"
#include "engine/ops.hpp"
#include "engine/sampler.hpp"
#include "lab01.hpp"
#include "print.hpp"

namespace pd::lab01 {

using lab::quoted_token;
using lab::shape;

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

namespace {

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

}  // namespace

Forward section_forward(const Lab& L) {
    Forward f = run_forward(L);
    print_layer_shapes(L);
    check_run_state(L, f);
    print_attention_pattern(L, f);
    logits_rows(L, f);
    return f;
}

}  // namespace pd::lab01
