// Lab 11, [3]: your matrix-vector product inside a real decode, every matrix
// of every layer through it, against the engine's own decode.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "engine/attention.hpp"
#include "engine/matmul.hpp"
#include "engine/model.hpp"
#include "engine/ops.hpp"
#include "engine/sampler.hpp"
#include "lab11.hpp"
#include "measure/roofline.hpp"
#include "print.hpp"

namespace pd::lab11 {

using nlohmann::json;

namespace {

// The model's matrices row-major (the CPU engine keeps only its panels).
struct RowMajor {
    struct Layer {
        std::vector<float> qkv, attn_out, mlp_in, mlp_out;
    };
    std::vector<Layer> layers;
    std::vector<float> head;
};

RowMajor row_major(const Model& m) {
    const CpuWeights& cw = cpu_weights(m);
    RowMajor r;
    for (const CpuLayer& L : cw.layers)
        r.layers.push_back({linear_rows_f32(L.qkv), linear_rows_f32(L.attn_out), linear_rows_f32(L.mlp_in),
                            linear_rows_f32(L.mlp_out)});
    r.head = linear_rows_f32(cw.head);
    return r;
}

// Scratch of one decode step, (dim), (q_dim + 2 kv_dim), ... as in RunState.
struct Scratch {
    std::vector<float> x, xn, qkv, att, proj, h, act, logits;
    explicit Scratch(const Config& c)
        : x(c.dim), xn(c.dim), qkv(c.q_dim() + 2 * c.kv_dim()), att(c.q_dim()), proj(c.dim),
          h(2 * c.hidden_dim), act(c.hidden_dim), logits(c.vocab_size) {}
};

// One Llama decode step for sequence 0 of `cache`, as model.cpp's forward, with
// every matrix product done by `mv`. Returns the logits (vocab).
const float* decode_step(const Model& m, const RowMajor& w, Matvec mv, KVCache& cache, Scratch& s, int token) {
    const Config& c = m.config;
    const int D = c.dim, Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim, pos = cache.seq_len[0], slot = 0;
    std::memcpy(s.x.data(), m.w.tok_emb.data() + std::size_t(token) * D, sizeof(float) * D);  // 1. embed
    for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = m.w.layers[l];
        rmsnorm(s.xn.data(), s.x.data(), L.norm1_w.data(), 1, D, c.norm_eps);                 // 2. norm
        mv(w.layers[l].qkv.data(), s.xn.data(), s.qkv.data(), Q + 2 * KV, D);                  // 3. q, k, v
        rope(s.qkv.data(), 1, Q + 2 * KV, c.n_heads, c.head_dim, &pos, cache.rope_cos.data(), cache.rope_sin.data());
        rope(s.qkv.data() + Q, 1, Q + 2 * KV, c.n_kv_heads, c.head_dim, &pos, cache.rope_cos.data(),
             cache.rope_sin.data());                                                            // 4. rotary
        kv_write(cache, l, slot, pos, s.qkv.data() + Q, s.qkv.data() + Q + KV);                // 5. cache
        attention_decode(s.att.data(), s.qkv.data(), cache, l, &slot, &pos, 1, c.n_heads);     // 6. attention
        mv(w.layers[l].attn_out.data(), s.att.data(), s.proj.data(), D, Q);                    // 7. out + residual
        add_inplace(s.x.data(), s.proj.data(), D);
        rmsnorm(s.xn.data(), s.x.data(), L.norm2_w.data(), 1, D, c.norm_eps);                 // 8. MLP
        mv(w.layers[l].mlp_in.data(), s.xn.data(), s.h.data(), 2 * F, D);
        swiglu(s.act.data(), s.h.data(), 1, F);
        mv(w.layers[l].mlp_out.data(), s.act.data(), s.proj.data(), D, F);
        add_inplace(s.x.data(), s.proj.data(), D);
    }
    rmsnorm(s.xn.data(), s.x.data(), m.w.norm_f_w.data(), 1, D, c.norm_eps);                  // 9. head
    mv(w.head.data(), s.xn.data(), s.logits.data(), c.vocab_size, D);
    cache.seq_len[0] = pos + 1;
    return s.logits.data();
}

}  // namespace

Matvec pick_kernel(const std::string& name, const std::string& fastest) {
    for (const Version& v : kVersions)
        if (name == v.name || (name == "fastest" && fastest == v.name)) return v.f;
    fail("--kernel {}: use fastest, naive, unrolled, threads or simd", name);
}

// decode_step() is the f32 forward of Llama's skeleton (RMSNorm, rotary, SwiGLU,
// no biases): refuse any model it would get wrong before [1] and [2] run, a
// Qwen2 checkpoint (Llama's skeleton with q/k/v biases) among them.
void check_decodable(const Options& o, const Model& m) {
    const Config& c = m.config;
    const FamilyTraits& t = c.traits();
    const bool llama_skeleton = t.norm == Norm::rmsnorm && t.mlp == Mlp::swiglu && t.positions == Positions::rotary &&
                                !t.linear_bias && !c.qkv_bias;
    if (!llama_skeleton || m.precision != Precision::f32)
        fail("[3] runs f32 models of Llama's skeleton without biases (tiny, synthetic:bench-llama-125m); {} is {} {}{}: "
             "pass --model tiny --precision f32", o.lab.model, family_name(c.family), precision_name(m.precision),
             c.qkv_bias ? " with q/k/v biases" : "");
}

json plugged_decode(const Options& o, const Model& m, const std::string& fastest, bool& same) {
    const Config& c = m.config;
    const RowMajor w = row_major(m);
    const int steps = std::min(o.steps, c.max_seq_len - 5);
    std::vector<int> prompt = {1, 2, 3, 4};
    KVCache mine = make_kv_cache(m, 1, int(prompt.size()) + steps), ref = mine;
    RunState st = make_run_state(c, int(prompt.size()));
    int tok_mine = argmax(prefill(m, mine, st, 0, prompt), c.vocab_size);
    int tok_ref = argmax(prefill(m, ref, st, 0, prompt), c.vocab_size);
    Scratch sc(c);
    const Matvec mv = pick_kernel(o.kernel, fastest);
    const std::string kernel = o.kernel == "fastest" ? "fastest (" + fastest + ")" : o.kernel;
    std::vector<int> ids_mine{tok_mine}, ids_ref{tok_ref};
    std::vector<double> ms_mine, ms_ref;
    for (int k = 0; k < steps; k++) {
        double t0 = now_ms();
        ids_mine.push_back(tok_mine = argmax(decode_step(m, w, mv, mine, sc, tok_mine), c.vocab_size));
        ms_mine.push_back(now_ms() - t0);
        t0 = now_ms();
        ids_ref.push_back(tok_ref = argmax(decode(m, ref, st, std::vector<int>{0}, std::vector<int>{tok_ref}), c.vocab_size));
        ms_ref.push_back(now_ms() - t0);
    }
    same = ids_mine == ids_ref;
    std::printf("\n[3] your %s product inside a real decode of %s (prompt 1,2,3,4; %d greedy steps)\n",
                kernel.c_str(), o.lab.model.c_str(), steps);
    std::printf("  yours    %s   median %.3f ms/token\n  engine's %s   median %.3f ms/token\n  %s\n",
                lab::id_list(ids_mine).c_str(), percentile(ms_mine, 50), lab::id_list(ids_ref).c_str(),
                percentile(ms_ref, 50), same ? "the same tokens (ok)" : "<-- DIFFERENT tokens: run the lab11 tests");
    return {{"model", o.lab.model}, {"kernel", kernel}, {"tokens", ids_mine}, {"engine_tokens", ids_ref},
            {"same", same}, {"ms_per_token", percentile(ms_mine, 50)}, {"engine_ms_per_token", percentile(ms_ref, 50)}};
}

}  // namespace pd::lab11
