#include "weights_upload.hpp"

#include "common.hpp"
#include "engine/bf16_convert.hpp"
#include "engine/matmul.hpp"
#include "engine/ops.hpp"
#include "engine/quantize.hpp"

namespace pd::gpu {

namespace {

std::vector<bf16> rounded_to_bf16(const std::vector<float>& v) {
    std::vector<bf16> r(v.size());
    to_bf16(v.data(), r.data(), v.size());
    return r;
}

const float* upload_opt(DeviceArena& arena, const std::vector<float>& v) {
    return v.empty() ? nullptr : arena.upload(v);
}

// int8: quantized with the CPU's own quantize_rows, so the device holds
// the very int8 values and scales of the CPU's panels, uploaded as they
// are for the GEMV (decode: M <= kGemvMaxRows). Prefill multiplies many
// rows at once with cuBLAS, which takes no per-group scales: it reads the
// same weights dequantized to bf16, made here once, as the CPU's oneDNN
// copy of an int8 Linear is. That costs device memory (3 bytes and the
// scales per weight, against bf16's 2) but no time: dequantizing per
// product would write and re-read 2 bytes per weight in every prefill
// product, into a scratch as large as the largest matrix (the 1B model's
// head: 525 MB). Decode reads only the int8 bytes either way.
void upload_int8(DeviceLinear& d, DeviceArena& arena, const std::vector<float>& rows, int group) {
    const QuantizedMatrix qm = quantize_rows(rows.data(), d.out, d.in, group);
    d.q = arena.upload(qm.q);
    d.scales = arena.upload(qm.scales);
    d.group = group;
    d.w = arena.upload(rounded_to_bf16(dequantize_rows(qm)));
}

// One matrix (its rows: `rows`, (out, in)) and its bias in precision p.
DeviceLinear upload(DeviceArena& arena, const Matrix& m, const std::vector<float>& rows, Precision p) {
    DeviceLinear d;
    d.in = m.in;
    d.out = m.out;
    d.bf16 = p != Precision::f32;
    PD_GPU_REQUIRE(rows.size() == std::size_t(m.in) * m.out);
    if (is_int8(p)) upload_int8(d, arena, rows, group_size(p));
    else if (d.bf16) d.w = arena.upload(rounded_to_bf16(rows));
    else d.w = arena.upload(rows);
    if (!m.bias.empty()) {
        PD_GPU_REQUIRE(m.bias.size() == std::size_t(m.out));
        d.bias = arena.upload(m.bias);
    }
    return d;
}

}  // namespace

DeviceShape device_shape(const Config& c) {
    DeviceShape s;
    const FamilyTraits& t = c.traits();
    s.rmsnorm = t.norm == Norm::rmsnorm, s.rotary = t.positions == Positions::rotary, s.swiglu = t.mlp == Mlp::swiglu;
    s.dim = c.dim, s.hidden_dim = c.hidden_dim, s.n_layers = c.n_layers;
    s.n_heads = c.n_heads, s.n_kv_heads = c.n_kv_heads, s.head_dim = c.head_dim;
    s.vocab_size = c.vocab_size, s.max_seq_len = c.max_seq_len, s.norm_eps = c.norm_eps;
    return s;
}

bool head_shares_embedding(const Weights& w) {
    return w.head.w.empty() && w.precision == Precision::f32 && w.head.bias.empty();
}

std::size_t weight_bytes_on_device(const Weights& w) {
    const std::size_t bf16_copy = is_int8(w.precision) ? sizeof(bf16) : 0;
    auto lin = [&](const Matrix& m) {
        return matrix_bytes(m.in, m.out, w.precision) + std::size_t(m.in) * m.out * bf16_copy +
               m.bias.size() * sizeof(float);
    };
    std::size_t n = (w.tok_emb.size() + w.pos_emb.size() + w.norm_f_w.size() + w.norm_f_b.size()) * sizeof(float);
    for (const LayerWeights& L : w.layers)
        n += lin(L.qkv) + lin(L.attn_out) + lin(L.mlp_in) + lin(L.mlp_out) +
             (L.norm1_w.size() + L.norm1_b.size() + L.norm2_w.size() + L.norm2_b.size()) * sizeof(float);
    if (!head_shares_embedding(w)) n += lin(w.head);
    return n;
}

void upload_weights(DeviceModel& dm, DeviceArena& arena, const Weights& w) {
    const Precision p = w.precision;
    dm.tok_emb = arena.upload(w.tok_emb);
    dm.pos_emb = upload_opt(arena, w.pos_emb);
    if (!dm.shape.rotary) PD_GPU_REQUIRE(dm.pos_emb != nullptr);
    dm.layers.reserve(w.layers.size());
    for (const LayerWeights& L : w.layers) {
        DeviceLayer d;
        d.norm1_w = upload_opt(arena, L.norm1_w);
        d.norm1_b = upload_opt(arena, L.norm1_b);
        d.norm2_w = upload_opt(arena, L.norm2_w);
        d.norm2_b = upload_opt(arena, L.norm2_b);
        d.qkv = upload(arena, L.qkv, L.qkv.w, p);
        d.attn_out = upload(arena, L.attn_out, L.attn_out.w, p);
        d.mlp_in = upload(arena, L.mlp_in, L.mlp_in.w, p);
        d.mlp_out = upload(arena, L.mlp_out, L.mlp_out.w, p);
        // Every product of a model has the same precision: forward() relies on it.
        for (const DeviceLinear* x : {&d.qkv, &d.attn_out, &d.mlp_in, &d.mlp_out}) PD_GPU_REQUIRE(x->bf16 == dm.bf16);
        dm.layers.push_back(d);
    }
    dm.norm_f_w = upload_opt(arena, w.norm_f_w);
    dm.norm_f_b = upload_opt(arena, w.norm_f_b);
    if (head_shares_embedding(w)) {
        dm.head.in = w.head.in, dm.head.out = w.head.out, dm.head.bf16 = false;
        dm.head.w = dm.tok_emb;
    } else {
        dm.head = upload(arena, w.head, head_rows(w), p);
    }
    PD_GPU_REQUIRE(dm.head.bf16 == dm.bf16);
}

void upload_rope(DeviceModel& dm, DeviceArena& arena, const Config& c, int S) {
    if (c.traits().positions != Positions::rotary) return;
    const std::size_t n = std::size_t(S) * (c.head_dim / 2);
    std::vector<float> cos_table(n), sin_table(n);
    rope_tables(cos_table.data(), sin_table.data(), S, c.head_dim, c.rope_theta, c.rope_scaling);
    dm.rope_cos = arena.upload(cos_table);
    dm.rope_sin = arena.upload(sin_table);
}

}  // namespace pd::gpu
