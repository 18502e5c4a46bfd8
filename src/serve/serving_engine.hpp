// What the serving scheduler (track 2) needs from the engine, and nothing
// more: KV memory counted in blocks, a prefix cache to consult when a request
// arrives, and ONE forward pass over a mixed batch in which some sequences
// bring a prefill chunk and others a single decode token.
//
// Two implementations:
//   SlotServingEngine  : over pd::Engine's contiguous cache (one slot per
//                        sequence, a block is bookkeeping only, no prefix
//                        cache); runs a step as one prefill per chunk and one
//                        decode for the decode rows. The baseline
//                        (serve-sim --engine slot).
//   PagedServingEngine : the paged KV cache (blocks, block tables, reference
//                        counts, hash-chained prefix cache) and one forward
//                        pass for the whole step, on the CPU or the GPU.
// Both give the same logits for the same work.
#pragma once

#include <span>

#include "io/config.hpp"

namespace pd::serve {

// One sequence's share of a step: a prefill chunk of any length (continuing
// its cache from cached_len(seq)), one decode token, or a speculative verify
// item (the decode token, then the proposed ones; every row gets logits).
struct SeqWork {
    int seq = 0;                  // a live sequence, from open()
    std::span<const int> tokens;  // (n) token ids, n >= 1
    // Rows at the END of the item that get logits: 0, 1 (the next token's),
    // or n (a verify item: row j scores the token after tokens[0..j]). Rows
    // past the first that get logits are tentative: truncate() settles them.
    int logit_rows = 1;
};

class ServingEngine {
public:
    virtual ~ServingEngine() = default;
    virtual const Config& config() const = 0;

    // KV memory, counted in blocks of block_size() positions.
    virtual int block_size() const = 0;
    virtual int total_blocks() const = 0;
    // Blocks a reserve() can still take: unused ones, and cached prefix
    // blocks no live sequence holds (evicted least recently used first).
    virtual int free_blocks() const = 0;

    // Starts sequence `seq` (any id not live now) for `prompt`, attaching the
    // longest run of whole cached blocks that prefixes the prompt, but never
    // all of it: the last prompt token is always computed, since its logits
    // pick the first output token. Returns the prompt tokens so covered
    // (a multiple of block_size(); 0 without a prefix cache). UserError when
    // the prompt cannot fit the context.
    virtual int open(int seq, std::span<const int> prompt) = 0;

    // Makes room for `len` positions of `seq` in all. False, with nothing
    // allocated, when there are not enough free blocks (the scheduler then
    // preempts a sequence, or waits).
    virtual bool reserve(int seq, int len) = 0;

    // Ends `seq` (finished, cancelled or preempted): its blocks go back to
    // the pool at once; whole blocks stay findable by the prefix cache until
    // their space is needed.
    virtual void close(int seq) = 0;

    // Positions of `seq` whose K/V are in the cache.
    virtual int cached_len(int seq) const = 0;

    // Keeps the first `len` positions of `seq` (len <= cached_len(seq)): the
    // rows of a verify item whose proposed tokens were rejected are forgotten,
    // blocks past `len` go back to the pool, and the next step writes over
    // the rest of the last one. Also settles the kept rows (a paged engine
    // offers their full blocks to its prefix cache).
    virtual void truncate(int seq, int len) = 0;

    // One forward pass over `work` (each sequence at most once; room already
    // reserved). Returns the logit rows the items ask for (logit_rows each),
    // in order: (rows, vocab), host memory, valid until the next step.
    virtual const float* step(std::span<const SeqWork> work) = 0;
};

}  // namespace pd::serve
