// Lab 09's worker ranks (1..P+D): YOUR codec in the prefill and decode workers.
#include <cstdio>

#include "lab09.hpp"
#include "load/model_source.hpp"
#include "serve/disagg/link_probe.hpp"
#include "serve/disagg/workers.hpp"

namespace pd::lab09 {

dg::KvCodec student_codec(int layers_per_message) {
    dg::KvCodec c;
    c.schedule = [layers_per_message](int n_layers) {
        return transfer_schedule(n_layers, layers_per_message > 0 ? layers_per_message : n_layers);
    };
    c.floats = packed_floats;
    c.pack = pack_kv;
    c.unpack = unpack_kv;
    return c;
}

int run_worker_rank(lab::CommandLine& cl, int argc, char** argv, Options& o, const dg::MpiSession& mpi) {
    cl.parse_quietly(argc, argv);  // rank 0 parses the same argv and says what is wrong
    int code = kGo, words[1] = {0};
    dg::broadcast_from_router(code, words, 1);
    if (code != kGo) return code;
    const dg::Layout layout{o.prefill, o.decode};
    try {
        auto model = load_model(o.lab.model, cli::precision_of(o.lab), false).model;
        const dg::KvCodec codec = student_codec(o.layers_per_message);
        dg::link_probe(layout, mpi.rank(), kProbeBytes, kProbeReps);
        // ignore_eos, as colocated: every request produces its max_tokens in both modes.
        const dg::WorkerOptions w{o.block_size, o.limits.max_seqs, words[0], o.worker_threads,
                                  mpi.rank() == o.stall_rank ? o.stall_after : -1.0, true};
        if (layout.is_prefill(mpi.rank())) dg::run_prefill_worker(model, codec, w);
        else dg::run_decode_worker(model, codec, w);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s (rank %d): %s\n", layout.role(mpi.rank()).c_str(), mpi.rank(), e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
}

}  // namespace pd::lab09
