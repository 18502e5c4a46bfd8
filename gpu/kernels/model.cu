// The forward pass on the GPU, step for step the one in src/engine/model.cpp.
#include "model.cuh"

#include <algorithm>

#include "attention.cuh"
#include "ops.cuh"

namespace pd::gpu {

namespace {

// Elements per row of each per-row buffer of DeviceRunState: the one place
// ensure_run_state allocates from and run_state_bytes counts. bf16 and int8
// weights use act16 (and mlp16 for Llama); f32 weights xn and mlp_act (the
// others stay empty).
struct RowElems {
    std::size_t x, xn, act16, qkv, att, mlp_h, mlp_act, mlp16;
};

RowElems row_elems(const DeviceShape& c, bool bf16) {
    RowElems e{};
    e.x = c.dim;
    e.qkv = c.qkv_dim();
    e.att = c.q_dim();
    e.mlp_h = c.mlp_in_dim();
    if (bf16) {
        e.act16 = std::max({c.dim, c.q_dim(), c.hidden_dim});
        e.mlp16 = c.swiglu ? c.hidden_dim : 0;
    } else {
        e.xn = c.dim;
        e.mlp_act = c.hidden_dim;
    }
    return e;
}

}  // namespace

std::size_t run_state_bytes(const DeviceShape& c, bool bf16, int rows, int logits_rows,
                            std::size_t scratch_floats) {
    const RowElems e = row_elems(c, bf16);
    const std::size_t f32_per_row = e.x + e.xn + e.qkv + e.att + e.mlp_h + e.mlp_act;
    const std::size_t per_row = f32_per_row * sizeof(float) + (e.act16 + e.mlp16) * sizeof(std::uint16_t) +
                                3 * sizeof(int);  // token, slot, pos
    const std::size_t per_logits_row = (std::size_t(c.dim) + c.vocab_size) * sizeof(float);
    return std::size_t(rows) * per_row + std::size_t(logits_rows) * per_logits_row +
           scratch_floats * sizeof(float);
}

std::size_t attention_scratch_floats(const DeviceShape& c, bool flash_prefill, int rows, int max_seq,
                                     int prefill_T, int prefill_start) {
    if (prefill_T == 0) return attention_decode_scratch(rows, c.n_heads, max_seq, c.head_dim);
    return flash_prefill ? 0 : attention_prefill_scratch(prefill_T, prefill_start, c.n_heads);
}

bool ensure_run_state(DeviceRunState& st, const DeviceModel& m, int rows, int logits_rows,
                      int max_seq, int prefill_T, int prefill_start) {
    const DeviceShape& c = m.shape;
    bool moved = false;
    if (rows > st.capacity) {
        const std::size_t R = std::size_t(rows);
        const RowElems e = row_elems(c, m.bf16);
        st.x.resize(R * e.x);
        st.xn.resize(R * e.xn);
        st.act16.resize(R * e.act16);
        st.qkv.resize(R * e.qkv);
        st.att.resize(R * e.att);
        st.mlp_h.resize(R * e.mlp_h);
        st.mlp_act.resize(R * e.mlp_act);
        st.mlp16.resize(R * e.mlp16);
        st.token.resize(R);
        st.slot.resize(R);
        st.pos.resize(R);
        st.capacity = rows;
        moved = true;
    }
    if (logits_rows > st.logits_rows) {
        st.kept.resize(std::size_t(logits_rows) * c.dim);
        st.logits.resize(std::size_t(logits_rows) * c.vocab_size);
        st.logits_rows = logits_rows;
        moved = true;
    }
    // Attention scratch for this pass (it only grows): a cuBLAS prefill's
    // scores, or a decode of `rows` rows' split partials.
    const std::size_t scratch = attention_scratch_floats(c, m.flash_prefill, rows, max_seq, prefill_T, prefill_start);
    if (st.att_scratch.ensure(scratch)) moved = true;
    if (moved) st.generation++;
    return moved;
}

void forward(const DeviceModel& m, DeviceKVCache& cache, DeviceRunState& st, const Blas& blas,
             const ForwardArgs& a) {
    const DeviceShape& c = m.shape;
    const cudaStream_t s = blas.stream();
    const int rows = a.rows;
    const int D = c.dim, Q = c.q_dim(), KV = c.kv_dim(), F = c.hidden_dim, QKV = c.qkv_dim();
    const bool bf16 = m.bf16;
    PD_GPU_REQUIRE(rows >= 1 && rows <= st.capacity);
    PD_GPU_REQUIRE(a.n_kept >= 1 && a.n_kept <= st.logits_rows && a.first_kept >= 0 &&
                   a.first_kept + a.n_kept <= rows);
    float* x = st.x.data();
    const int* pos = st.pos.data();
    const int* slot = st.slot.data();
    std::uint16_t* act16 = st.act16.data();  // the bf16 input of every product when bf16

    // Every product reads either an f32 buffer (f32 weights) or act16 (bf16
    // weights, filled by the kernel before it).
    auto product = [&](const DeviceLinear& L, const float* in_f32, int M, float* y, bool accumulate) {
        if (bf16) linear(blas, L, act16, M, y, accumulate);
        else linear(blas, L, in_f32, M, y, accumulate);
    };
    // norm(in) into the input of the next product.
    auto norm = [&](const float* w, const float* b, const float* in, int M) {
        if (c.rmsnorm) {
            if (bf16) rmsnorm(act16, in, w, M, D, c.norm_eps, s);
            else rmsnorm(st.xn.data(), in, w, M, D, c.norm_eps, s);
        } else {
            if (bf16) layernorm(act16, in, w, b, M, D, c.norm_eps, s);
            else layernorm(st.xn.data(), in, w, b, M, D, c.norm_eps, s);
        }
    };

    // 1. Embed: x = token embedding (+ learned position embedding for GPT-2).
    embed(x, st.token.data(), pos, m.tok_emb, c.rotary ? nullptr : m.pos_emb, rows, D, s);

    for (int l = 0; l < c.n_layers; l++) {
        const DeviceLayer& L = m.layers[l];
        const KVLayer kv = cache.layer(l);

        // 2. Attention sublayer input: xn = norm(x).
        norm(L.norm1_w, L.norm1_b, x, rows);

        // 3. Project to queries, keys and values: (rows, D) -> (rows, Q + 2 KV).
        product(L.qkv, st.xn.data(), rows, st.qkv.data(), false);

        // 4. Rotary positions on q and k (Llama); GPT-2 added positions in step 1.
        // 5. Append each row's K and V to its sequence's cache, at its position.
        //    Llama does both in one launch: q rotated in place, the rotated k and
        //    the v written straight into the cache (the row's k part stays
        //    unrotated: every attention path reads K from the cache).
        if (c.rotary)
            rope_kv_write(kv, st.qkv.data(), QKV, c.n_heads, slot, pos, m.rope_cos, m.rope_sin, rows, s);
        else
            kv_write(kv, st.qkv.data() + Q, st.qkv.data() + Q + KV, QKV, slot, pos, rows, s);

        // 6. Attention over the cache; q is read in place from the qkv rows.
        //    Prefill: T queries of one sequence, query i sees positions 0..start+i;
        //             bf16 models on the flash kernel (no score matrix), straight into act16.
        //    Decode : one query per sequence, each sees its whole cache.
        if (a.phase == Phase::prefill && m.flash_prefill) {
            attention_prefill_flash(act16, st.qkv.data(), QKV, kv, a.slot, a.start, rows, c.n_heads, s);
        } else if (a.phase == Phase::prefill) {
            attention_prefill(blas, st.att.data(), st.qkv.data(), QKV, kv, a.slot, a.start, rows,
                              c.n_heads, st.att_scratch.data(), /*allow_tf32=*/bf16);
            if (bf16) to_bf16(act16, st.att.data(), long(rows) * Q, s);
        } else if (bf16) {
            attention_decode(act16, st.qkv.data(), QKV, kv, slot, pos, rows, c.n_heads,
                             st.att_scratch.data(), s);
        } else {
            attention_decode(st.att.data(), st.qkv.data(), QKV, kv, slot, pos, rows, c.n_heads,
                             st.att_scratch.data(), s);
        }

        // 7. Output projection and residual: x += att @ Wo^T (beta = 1 in the GEMM).
        product(L.attn_out, st.att.data(), rows, x, true);

        // 8. MLP sublayer: x += mlp(norm(x)).
        norm(L.norm2_w, L.norm2_b, x, rows);
        if (c.swiglu && bf16) {
            // silu(gate) * up into mlp16: for a few rows in the MLP-in GEMV's
            // epilogue, else after the product into mlp_h (matmul.cuh).
            linear_swiglu(blas, L.mlp_in, act16, rows, st.mlp16.data(), st.mlp_h.data());
            linear(blas, L.mlp_out, st.mlp16.data(), rows, x, true);
        } else {
            product(L.mlp_in, st.xn.data(), rows, st.mlp_h.data(), false);
            if (c.swiglu) swiglu(st.mlp_act.data(), st.mlp_h.data(), rows, F, s);  // silu(gate) * up
            else if (bf16) gelu_tanh(act16, st.mlp_h.data(), long(rows) * F, s);
            else gelu_tanh(st.mlp_act.data(), st.mlp_h.data(), long(rows) * F, s);
            product(L.mlp_out, st.mlp_act.data(), rows, x, true);
        }
    }

    // 9. Final norm and output head, only for the rows whose logits are wanted
    //    (they are consecutive: the last prompt row, every prompt row, or every
    //    decode row).
    const float* xr = x + std::size_t(a.first_kept) * D;
    if (bf16) {
        if (c.rmsnorm) rmsnorm(act16, xr, m.norm_f_w, a.n_kept, D, c.norm_eps, s);
        else layernorm(act16, xr, m.norm_f_w, m.norm_f_b, a.n_kept, D, c.norm_eps, s);
    } else {
        if (c.rmsnorm) rmsnorm(st.kept.data(), xr, m.norm_f_w, a.n_kept, D, c.norm_eps, s);
        else layernorm(st.kept.data(), xr, m.norm_f_w, m.norm_f_b, a.n_kept, D, c.norm_eps, s);
    }
    product(m.head, st.kept.data(), a.n_kept, st.logits.data(), false);
}

}  // namespace pd::gpu
