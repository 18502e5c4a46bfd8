#include "engine/onednn_matmul.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/bf16_convert.hpp"
#include "engine/isa.hpp"
#include "engine/onednn_api.hpp"

namespace pd {

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
    static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    return eng;
}

dnnl::stream& cpu_stream() {
    static dnnl::stream s(cpu_engine());
    return s;
}

// The primitive descriptor oneDNN picks for M rows of x in type `xdt` against
// weights `w_md` (tag::any lets it choose the layout).
dnnl::matmul::primitive_desc matmul_pd(int M, dt xdt, const dnnl::memory::desc& w_md, int N,
                                       const dnnl::memory::desc* bias_md, const dnnl::primitive_attr& attr) {
    dnnl::memory::desc src_md({M, onednn_dims(w_md)[0]}, xdt, tag::ab), dst_md({M, N}, dt::f32, tag::ab);
    return onednn_matmul_pd(cpu_engine(), src_md, w_md, bias_md, dst_md, attr);
}

}  // namespace

bool onednn_has_bf16() {
    static const bool has = [] {
        kernel_isa();  // PDLAB_ISA caps oneDNN: before the question is asked
        try {
            matmul_pd(128, dt::bf16, dnnl::memory::desc({64, 64}, dt::bf16, tag::any), 64, nullptr, {});
            return true;
        } catch (const dnnl::error&) {
            return false;
        }
    }();
    return has;
}

// One matmul primitive per row count M, all sharing the packed weights. A
// primitive is JIT-compiled on first use of its M, then reused.
struct PackedWeights {
    struct ForM {
        dnnl::matmul prim;
        dnnl::memory::desc src_md, dst_md, scratch_md;
        std::vector<std::uint8_t> scratch;    // user scratchpad: nothing allocated per call
        std::vector<bf16> src16;              // x converted to bf16 (bf16 weights)
        std::vector<float> src_rounded;       // x rounded to bf16, kept in f32 (bf16 widened)
        std::string impl;
    };

    dt wdt;                                // the packed weights' type
    bool widened = false;                  // bf16 weights packed as f32
    dnnl::memory weights;                  // (in, out) logically, blocked layout
    dnnl::memory bias;                     // (1, out), when has_bias
    bool has_bias = false;
    std::unordered_map<int, std::unique_ptr<ForM>> by_m;
    std::mutex mu;

    ForM& get(const Linear& L, int M) {
        std::lock_guard lock(mu);
        auto it = by_m.find(M);
        if (it != by_m.end()) return *it->second;
        auto f = std::make_unique<ForM>();
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::memory::desc bias_md;
        if (has_bias) bias_md = bias.get_desc();
        auto pd = matmul_pd(M, wdt, weights.get_desc(), L.out, has_bias ? &bias_md : nullptr, attr);
        f->prim = dnnl::matmul(pd);
        f->src_md = pd.src_desc();
        f->dst_md = pd.dst_desc();
        f->scratch_md = pd.scratchpad_desc();
        f->scratch.resize(f->scratch_md.get_size());
        if (wdt == dt::bf16) f->src16.resize(std::size_t(M) * L.in);
        if (widened) f->src_rounded.resize(std::size_t(M) * L.in);
        f->impl = pd.impl_info_str();
        return *by_m.emplace(M, std::move(f)).first->second;
    }
};

std::shared_ptr<PackedWeights> onednn_pack(const Linear& L, const float* w_out_in) {
    auto p = std::make_shared<PackedWeights>();
    // int8 and int4 Linears pass their dequantized weights: packed as bf16 ones are.
    const bool bf16_weights = L.precision.traits().prefill != PrefillPath::onednn_f32;
    p->widened = bf16_weights && !onednn_has_bf16();
    p->wdt = bf16_weights && !p->widened ? dt::bf16 : dt::f32;
    // Ask oneDNN which weight layout it wants for a typical prefill (M = 128),
    // then reorder once, from W^T: (in, out) row-major, made here. oneDNN
    // 3.7 reorders the transposed view of W (tag ba) with a kernel whose
    // output its brgemm matmul misreads in the last, partial block of 64
    // columns (every column when out < 64): from W^T it uses the matmul's own
    // copy routine. One temporary copy of the weights, on every version.
    auto pd = matmul_pd(128, p->wdt, dnnl::memory::desc({L.in, L.out}, p->wdt, tag::any), L.out, nullptr, {});
    std::vector<float> w_t(std::size_t(L.in) * L.out);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < L.in; i++)
        for (int o = 0; o < L.out; o++) {
            const float w = w_out_in[std::size_t(o) * L.in + i];
            w_t[std::size_t(i) * L.out + o] = p->widened ? bf16_to_f32(f32_to_bf16(w)) : w;  // widened: bf16 values in f32
        }
    dnnl::memory user({{L.in, L.out}, dt::f32, tag::ab}, cpu_engine(), w_t.data());
    p->weights = dnnl::memory(pd.weights_desc(), cpu_engine());
    dnnl::reorder(user, p->weights).execute(cpu_stream(), user, p->weights);
    if (!L.bias.empty()) {
        p->has_bias = true;
        p->bias = dnnl::memory({{1, L.out}, dt::f32, tag::ab}, cpu_engine());
        std::memcpy(p->bias.get_data_handle(), L.bias.data(), L.bias.size() * sizeof(float));
    }
    cpu_stream().wait();
    return p;
}

// x as the packed weights take it: converted to bf16, rounded to bf16 values
// in f32 (widened bf16), or as it is.
static const void* prepare_src(PackedWeights::ForM& f, const float* x, std::size_t n) {
    if (f.src16.empty() && f.src_rounded.empty()) return x;
    // In chunks over the threads: at P = 512 this is 27 M values per bench-llama prefill.
    constexpr std::size_t chunk = 16384;
    const long nchunks = long((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        const std::size_t a = std::size_t(c) * chunk, len = std::min(chunk, n - a);
        if (!f.src16.empty()) to_bf16(x + a, f.src16.data() + a, len);
        else round_to_bf16(x + a, f.src_rounded.data() + a, len);
    }
    return f.src16.empty() ? static_cast<const void*>(f.src_rounded.data()) : f.src16.data();
}

void onednn_forward(const Linear& L, const float* x, int M, float* y) {
    auto& f = L.packed->get(L, M);
    const void* src = prepare_src(f, x, std::size_t(M) * L.in);
    auto& eng = cpu_engine();
    dnnl::memory src_m(f.src_md, eng, const_cast<void*>(src));
    dnnl::memory dst_m(f.dst_md, eng, y);
    dnnl::memory scratch_m(f.scratch_md, eng, f.scratch.data());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src_m},
                                               {DNNL_ARG_WEIGHTS, L.packed->weights},
                                               {DNNL_ARG_DST, dst_m},
                                               {DNNL_ARG_SCRATCHPAD, scratch_m}};
    if (L.packed->has_bias) args[DNNL_ARG_BIAS] = L.packed->bias;
    f.prim.execute(cpu_stream(), args);
    cpu_stream().wait();
}

std::string onednn_impl_name(const Linear& L, int M) {
    std::string impl = L.packed->get(L, M).impl;
    if (L.packed->widened) impl += " (bf16 as f32)";
    if (L.precision.traits().prefill != PrefillPath::onednn_bf16_dequantized) return impl;
    return impl + " (" + L.precision.traits().name + " dequantized to bf16)";
}

}  // namespace pd
