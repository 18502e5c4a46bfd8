// The two kinds of worker rank of a disaggregated run (wire.hpp has the
// messages). Each owns a PagedServingEngine over the same model and lives in
// the same loop from kReady to kStop (worker_rank.hpp).
//
// Prefill worker: takes requests from the router one at a time, runs each
// whole prompt in ONE forward pass, and sends the sequence's KV blocks to the
// decode worker the router named, one message per LayerRange of the
// schedule, each posted (MPI_Isend) from the layer hook as soon as its last
// layer is computed, so a per-layer schedule overlaps the transfer with the
// rest of the prefill. Then token 1 (the prefill's argmax) follows.
//
// Decode worker: posts the receives of a transfer when its header arrives,
// keeps decoding its running sequences while the blocks come in, and when
// all have come (and token 1), adopts the sequence into its own paged cache
// (blocks allocated on arrival), unpacks, and decodes it with the others in
// one batched step per token, streaming every token to the router. A
// sequence ends by the engine's stop rule (engine/stop_rule.hpp), as the
// colocated Scheduler's do: max_tokens, the context, EOS unless ignore_eos.
//
// Both return when the router says kStop; a worker never waits on MPI without
// a deadline it checks (the router's watchdog ends a run that hangs).
#pragma once

#include <memory>

#include "engine/model.hpp"
#include "serve/disagg/kv_codec.hpp"
#include "serve/disagg/wire.hpp"

namespace pd::serve::disagg {

struct WorkerOptions {
    int block_size = 16;
    int max_seqs = 8;          // decode: sequences decoded together at most
    int max_len = 0;           // positions the longest request needs (sizes the pools)
    int threads = 1;           // OpenMP threads of this rank's forward passes
    double stall_after_s = -1;  // >= 0: stop answering this long after the start (tests the router's watchdog)
    bool ignore_eos = false;    // decode: generate past EOS (every request gets its max_tokens, context allowing)
};

void run_prefill_worker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o);
void run_decode_worker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o);

}  // namespace pd::serve::disagg
