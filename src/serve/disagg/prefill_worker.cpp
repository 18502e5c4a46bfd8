// The prefill worker (workers.hpp): one prompt per forward pass, its KV sent
// layer range by layer range from the layer hook.
#include <deque>

#include "common.hpp"
#include "engine/sampler.hpp"
#include "serve/disagg/worker_rank.hpp"

namespace pd::serve::disagg {

namespace {

struct Job {
    int id = 0, decode_rank = 0, max_tokens = 0;
    std::vector<int> prompt;
};

Job parse_request(const std::vector<int>& m) {
    if (m.size() < 4) fail("internal error: a request message of {} ints", m.size());
    return {m[0], m[1], m[2], std::vector<int>(m.begin() + 3, m.end())};
}

// kKvHeader: [id, max_tokens, n_blocks, n_messages, (first, last)..., prompt...]
std::vector<int> header(const Job& j, int n_blocks, const std::vector<LayerRange>& plan) {
    std::vector<int> h = {j.id, j.max_tokens, n_blocks, int(plan.size())};
    for (const LayerRange& r : plan) h.insert(h.end(), {r.first, r.last});
    h.insert(h.end(), j.prompt.begin(), j.prompt.end());
    return h;
}

// One prompt at a time: its pool holds one request.
class PrefillWorker final : public WorkerRank {
public:
    PrefillWorker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o)
        : WorkerRank(std::move(model), codec, o, 1) {}

private:
    void take_messages() override {
        while (probe(0, kRequest) >= 0) queue_.push_back(parse_request(receive_ints(0, kRequest)));
    }
    bool has_work() const override { return !queue_.empty(); }
    void work() override {
        prefill(queue_.front());
        queue_.pop_front();
    }

    // Runs the prompt; the hook posts each message of the plan when its last layer is done.
    void prefill(const Job& j) {
        const double start = now_s();
        engine_.open(j.id, j.prompt);
        if (!engine_.reserve(j.id, int(j.prompt.size())))
            fail("the prefill worker's pool cannot hold a prompt of {} tokens", j.prompt.size());
        const BlockTable& table = engine_.block_table(j.id);
        const int n_blocks = blocks_for(engine_.kv_cache(), int(j.prompt.size()));
        const std::vector<LayerRange> plan = codec_.schedule(engine_.config().n_layers);
        outbox_.send(header(j, n_blocks, plan), j.decode_rank, kKvHeader);
        std::size_t next = 0;
        double first_send = 0, bytes = 0;
        engine_.set_layer_hook([&](int layer) {
            while (next < plan.size() && plan[next].last == layer + 1) {
                // table.len moves only after the pass: the positions being written are the prompt's.
                BlockTable full = table;
                full.len = int(j.prompt.size());
                std::vector<float> msg(codec_.floats(engine_.kv_cache(), n_blocks, plan[next]));
                codec_.pack(engine_.kv_cache(), full, plan[next], msg);
                bytes += double(msg.size() * sizeof(float));
                if (first_send == 0) first_send = now_s();
                outbox_.send(std::move(msg), j.decode_rank, kKvData);
                next++;
            }
            outbox_.poll();  // MPI moves a message only when called: let the earlier layers go on
        });
        const SeqWork work{j.id, j.prompt, 1};
        const float* logits = engine_.step({&work, 1});
        engine_.set_layer_hook({});
        if (next != plan.size()) fail("internal error: the transfer schedule left layers unsent");
        const int token = argmax(logits, engine_.config().vocab_size);
        const double end = now_s();
        engine_.close(j.id);  // every message holds its own copy of the blocks
        outbox_.send(std::vector<int>{j.id, token}, j.decode_rank, kFirstToken);
        outbox_.send(std::vector<double>{double(j.id), start, end, first_send, bytes}, 0, kPrefillDone);
    }

    std::deque<Job> queue_;
};

}  // namespace

void run_prefill_worker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o) {
    PrefillWorker(std::move(model), codec, o).run();
}

}  // namespace pd::serve::disagg
