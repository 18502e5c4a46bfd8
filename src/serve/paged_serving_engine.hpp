// PagedServingEngine: the serving seam (serving_engine.hpp) over the paged KV
// cache. KV memory is a pool of blocks; each sequence holds a block table
// that grows a block at a time; full blocks are offered to the prefix cache,
// so a request starting like an earlier one attaches that one's blocks
// instead of recomputing them; a step is ONE forward pass (forward_batch)
// over every sequence's chunk or decode token. The bookkeeping is on the host
// on either device; K/V and the forward pass are on PagedOptions::device
// (engine.hpp's PagedForward).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine.hpp"
#include "engine/model.hpp"
#include "engine/prefix_index.hpp"
#include "serve/serving_engine.hpp"

namespace pd::serve {

struct PagedOptions {
    int block_size = 16;         // positions per block
    int total_blocks = 0;        // blocks in the pool; 0: as many as kv_bytes holds
    std::size_t kv_bytes = 0;    // KV memory, when total_blocks is 0
    int threads = 0;             // OpenMP threads for the forward pass (0: as set already)
    bool prefix_caching = true;  // offer full blocks to the prefix cache, consult it in open()
    // The block bookkeeping and the prefix lookup; empty: the engine's own
    // (BlockAllocator, PrefixCache). Lab 07 plugs the student's in here.
    BlockPoolFactory make_block_pool = {};
    PrefixIndexFactory make_prefix_index = {};
    Device device = Device::cpu;  // where K/V live and the forward passes run (engine.hpp's PagedForward)
};

// Bytes of K/V live sequences hold (blocks) against what they fill (positions);
// a block shared by several sequences is counted once per sequence.
struct KvMemoryUse {
    std::size_t reserved_bytes = 0;
    std::size_t used_bytes = 0;
};

class PagedServingEngine final : public ServingEngine {
public:
    PagedServingEngine(std::shared_ptr<const Model> model, const PagedOptions& opts);

    const Config& config() const override { return model_->config; }
    int block_size() const override { return cache_.block_size; }
    int total_blocks() const override { return cache_.total_blocks(); }
    int free_blocks() const override { return cache_.blocks->available(); }
    int open(int seq, std::span<const int> prompt) override;
    bool reserve(int seq, int len) override;
    void close(int seq) override;
    int cached_len(int seq) const override;
    void truncate(int seq, int len) override;
    const float* step(std::span<const SeqWork> work) override;

    KvMemoryUse memory_use() const;
    std::string hardware() const { return forward_->hardware(); }
    std::size_t bytes_per_block() const { return cache_.bytes_per_block(); }

    // For moving a sequence between engines (lab 09, disaggregated serving; CPU only).
    // The pool itself, and the blocks of a live sequence in position order.
    PagedKVCache& kv_cache();
    const BlockTable& block_table(int seq) const { return live(seq).table; }
    // Starts `seq` as if `tokens` had been computed here: blocks for all of
    // them, table.len = tokens.size(). The caller writes their K/V into the
    // returned table's blocks before the next step. Null, with nothing
    // allocated, when the pool lacks the blocks.
    const BlockTable* adopt(int seq, std::span<const int> tokens);
    // Called after every layer of the following steps (model.hpp's LayerHook; CPU only); {} for none.
    void set_layer_hook(LayerHook hook) { layer_hook_ = std::move(hook); }

private:
    struct Sequence {
        BlockTable table;                  // its blocks; table.len positions cached
        std::vector<int> tokens;           // (table.len) the ids of the cached positions
        std::vector<std::uint64_t> keys;   // (full blocks offered) prefix-cache key of each
    };
    Sequence& live(int seq);
    const Sequence& live(int seq) const;
    void offer_full_blocks(Sequence& s, int settled);

    std::shared_ptr<const Model> model_;
    bool prefix_caching_;
    PagedKVCache cache_;
    std::unique_ptr<PrefixIndex> prefix_;  // refers to *cache_.blocks: declared after it
    std::unique_ptr<PagedForward> forward_;  // holds K/V on its device and runs the steps
    std::unordered_map<int, Sequence> seqs_;
    std::vector<BatchItem> items_;  // (work items) the step's batch, reused
    LayerHook layer_hook_;
};

std::unique_ptr<PagedServingEngine> make_paged_serving_engine(std::shared_ptr<const Model> model,
                                                              const PagedOptions& opts);

}  // namespace pd::serve
