// Lab 07's replay: the trace through the kit's Scheduler (continuous
// batching) on the paged engine with your allocator and prefix cache, its KV
// memory noted after every step.
#include "exercise.hpp"
#include "lab07.hpp"

namespace pd::lab07 {

namespace {

// The paged engine, seen from the scheduler, with a note of its memory after
// every step. Everything else is passed through.
class MemoryProbe final : public serve::ServingEngine {
public:
    explicit MemoryProbe(serve::PagedServingEngine& e)
        : e_(e), slot_bytes_(e.bytes_per_block() / std::size_t(e.block_size()) * std::size_t(e.config().max_seq_len)) {}
    const std::vector<MemoryAt>& series() const { return series_; }

    const Config& config() const override { return e_.config(); }
    int block_size() const override { return e_.block_size(); }
    int total_blocks() const override { return e_.total_blocks(); }
    int free_blocks() const override { return e_.free_blocks(); }
    int open(int seq, std::span<const int> prompt) override {
        const int covered = e_.open(seq, prompt);
        live_++;
        return covered;
    }
    bool reserve(int seq, int len) override { return e_.reserve(seq, len); }
    void close(int seq) override { live_--, e_.close(seq); }
    int cached_len(int seq) const override { return e_.cached_len(seq); }
    void truncate(int seq, int len) override { e_.truncate(seq, len); }
    const float* step(std::span<const serve::SeqWork> work) override {
        const float* logits = e_.step(work);
        const serve::KvMemoryUse u = e_.memory_use();
        series_.push_back({live_, u.used_bytes, u.reserved_bytes,
                           std::size_t(e_.total_blocks() - e_.free_blocks()) * e_.bytes_per_block(),
                           std::size_t(live_) * slot_bytes_});
        return logits;
    }

private:
    serve::PagedServingEngine& e_;
    std::size_t slot_bytes_;
    int live_ = 0;
    std::vector<MemoryAt> series_;
};

}  // namespace

// One replay of the trace through the Scheduler over the paged engine built
// with your allocator and prefix cache.
Run replay_once(const cli::Session& s, const Options& o, const serve::Trace& trace,
                const std::vector<serve::Request>& reqs, int total_blocks, bool prefix_caching) {
    serve::PagedOptions po = student_paged_options(o.block_size, total_blocks, prefix_caching);
    po.threads = o.lab.threads;
    auto engine = serve::make_paged_serving_engine(s.loaded.model, po);
    MemoryProbe probe(*engine);
    serve::CountingServingEngine counted(probe);
    serve::ContinuousBatching policy;
    const Config& c = s.loaded.model->config;
    // ignore_eos: every request produces its max_tokens, so both runs do the same work.
    serve::Scheduler sched(counted, policy, {o.limits, c.max_seq_len, c.eos_ids, true, std::nullopt});
    Run run;
    run.r = serve::replay(sched, trace, reqs, !o.quiet);
    run.m = serve::compute_serving_metrics(run.r.timings, run.r.duration_s);
    run.kv = counted.counters();
    run.memory = probe.series();
    return run;
}


}  // namespace pd::lab07
