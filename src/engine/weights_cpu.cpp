#include "engine/weights_cpu.hpp"

#include <omp.h>

#include <utility>

namespace pd {

namespace {

// Packs m. make_linear takes the rows by value: releasing hands them over
// (freed once packed, no copy); keeping copies them for the CUDA engine.
Linear pack(Matrix& m, Precision precision, RowsAfterPacking rows) {
    if (rows == RowsAfterPacking::keep) return make_linear(m.w, m.bias, m.in, m.out, precision);
    return make_linear(std::exchange(m.w, {}), m.bias, m.in, m.out, precision);
}

}  // namespace

CpuWeights prepare_cpu_weights(Weights& w, RowsAfterPacking rows, bool huge_pages) {
    const Precision p = w.precision;
    CpuWeights cpu;
    cpu.layers.reserve(w.layers.size());
    for (LayerWeights& L : w.layers)
        cpu.layers.push_back({pack(L.qkv, p, rows), pack(L.attn_out, p, rows), pack(L.mlp_in, p, rows),
                              pack(L.mlp_out, p, rows)});
    // A tied head's rows are tok_emb, which the CPU's embedding step reads: kept.
    cpu.head = w.head.w.empty() ? make_linear(w.tok_emb, w.head.bias, w.head.in, w.head.out, p)
                                : pack(w.head, p, rows);
    // Decode streams the matrices in this order, step after step: lay each
    // thread's share of them out back to back (one stream per thread).
    std::vector<Linear*> in_decode_order;
    for (CpuLayer& L : cpu.layers)
        for (Linear* lin : {&L.qkv, &L.attn_out, &L.mlp_in, &L.mlp_out}) in_decode_order.push_back(lin);
    in_decode_order.push_back(&cpu.head);
    arrange_for_decode(in_decode_order, omp_get_max_threads(), huge_pages);
    w.rows_released = rows == RowsAfterPacking::release;
    return cpu;
}

}  // namespace pd
