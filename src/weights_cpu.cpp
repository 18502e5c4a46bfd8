#include "weights_cpu.hpp"

#include <omp.h>

namespace pd {

namespace {

Linear pack(const Matrix& m, Precision precision) { return make_linear(m.w, m.bias, m.in, m.out, precision); }

}  // namespace

CpuWeights prepare_cpu_weights(const Weights& w) {
    CpuWeights cpu;
    cpu.layers.reserve(w.layers.size());
    for (const LayerWeights& L : w.layers)
        cpu.layers.push_back({pack(L.qkv, w.precision), pack(L.attn_out, w.precision),
                              pack(L.mlp_in, w.precision), pack(L.mlp_out, w.precision)});
    cpu.head = make_linear(head_rows(w), w.head.bias, w.head.in, w.head.out, w.precision);
    // Decode streams the matrices in this order, step after step: lay each
    // thread's share of them out back to back (one stream per thread).
    std::vector<Linear*> in_decode_order;
    for (CpuLayer& L : cpu.layers)
        for (Linear* lin : {&L.qkv, &L.attn_out, &L.mlp_in, &L.mlp_out}) in_decode_order.push_back(lin);
    in_decode_order.push_back(&cpu.head);
    arrange_for_decode(in_decode_order, omp_get_max_threads());
    return cpu;
}

const CpuWeights& CpuWeightsOnce::get(const Weights& w) {
    std::call_once(once_, [&] { weights_ = std::make_unique<const CpuWeights>(prepare_cpu_weights(w)); });
    return *weights_;
}

}  // namespace pd
