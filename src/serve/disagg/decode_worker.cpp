// The decode worker (workers.hpp): transfers land while it decodes; a landed
// sequence joins the next batched decode step.
#include <algorithm>
#include <list>
#include <unordered_map>

#include "common.hpp"
#include "engine/sampler.hpp"
#include "engine/stop_rule.hpp"
#include "serve/disagg/worker_rank.hpp"

namespace pd::serve::disagg {

namespace {

// One sequence's KV on its way in.
struct Incoming {
    int id = 0, source = 0, max_tokens = 0, n_blocks = 0;
    std::vector<int> prompt;
    std::vector<LayerRange> plan;
    std::vector<std::vector<float>> messages;  // (plan) the receive buffers
    std::vector<MPI_Request> reqs;             // (plan)
    int first_token = -1;                      // from kFirstToken
};

struct Running {
    int id = 0, prompt_len = 0, last_token = 0, produced = 0;
    StopLimits stop;              // the engine's stop rule: EOS (unless ignored), max_tokens, the context
    StopReason why = StopReason::none;  // after the last token emitted
};

// Up to max_seqs sequences at once: its pool holds max_seqs requests.
class DecodeWorker final : public WorkerRank {
public:
    DecodeWorker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o)
        : WorkerRank(std::move(model), codec, o, o.max_seqs) {}

private:
    void take_messages() override {
        take_headers_and_tokens();
        land_transfers();
    }
    bool has_work() const override { return !running_.empty(); }
    void work() override { decode_step(); }
    bool may_stop() const override { return incoming_.empty(); }

    // Headers post their receives at once; first tokens find their transfer.
    void take_headers_and_tokens() {
        for (int src; (src = probe(MPI_ANY_SOURCE, kKvHeader)) >= 0;) start_transfer(src, receive_ints(src, kKvHeader));
        // A header and its token 1 can both arrive between the two loops: the
        // token then waits in early_tokens_ for the next call's header.
        for (int src; (src = probe(MPI_ANY_SOURCE, kFirstToken)) >= 0;) {
            const std::vector<int> m = receive_ints(src, kFirstToken);
            early_tokens_[m.at(0)] = m.at(1);
        }
        for (Incoming& in : incoming_) {
            auto t = early_tokens_.find(in.id);
            if (t == early_tokens_.end()) continue;
            in.first_token = t->second;
            early_tokens_.erase(t);
        }
    }

    void start_transfer(int source, const std::vector<int>& h) {
        Incoming in;
        in.id = h.at(0), in.source = source, in.max_tokens = h.at(1), in.n_blocks = h.at(2);
        const int n_messages = h.at(3);
        for (int m = 0; m < n_messages; m++) in.plan.push_back({h.at(4 + 2 * m), h.at(5 + 2 * m)});
        in.prompt.assign(h.begin() + 4 + 2 * n_messages, h.end());
        incoming_.push_back(std::move(in));
        Incoming& x = incoming_.back();  // a list: the buffers MPI writes into never move
        x.reqs.assign(x.plan.size(), MPI_REQUEST_NULL);
        for (std::size_t m = 0; m < x.plan.size(); m++) {
            x.messages.emplace_back(codec_.floats(engine_.kv_cache(), x.n_blocks, x.plan[m]));
        }
        for (std::size_t m = 0; m < x.plan.size(); m++)
            MPI_Irecv(x.messages[m].data(), checked_count(x.messages[m].size(), "a KV message"), MPI_FLOAT,
                      source, kKvData, MPI_COMM_WORLD, &x.reqs[m]);
    }

    // Every transfer whose messages all arrived, with its token 1, joins the running set
    // while there is room (max_seqs and free blocks).
    void land_transfers() {
        for (auto it = incoming_.begin(); it != incoming_.end();) {
            int done = 0;
            MPI_Testall(int(it->reqs.size()), it->reqs.data(), &done, MPI_STATUSES_IGNORE);
            if (!done || it->first_token < 0 || int(running_.size()) >= opts_.max_seqs || !adopt(*it)) {
                ++it;
                continue;
            }
            it = incoming_.erase(it);
        }
    }

    bool adopt(const Incoming& in) {
        const BlockTable* t = engine_.adopt(in.id, in.prompt);
        if (!t) return false;
        for (std::size_t m = 0; m < in.plan.size(); m++) codec_.unpack(in.messages[m], in.plan[m], engine_.kv_cache(), *t);
        outbox_.send(std::vector<double>{double(in.id), now_s()}, 0, kKvArrived);
        Running r{in.id, int(in.prompt.size()), in.first_token, 0,
                  {eos_ids(engine_.config().eos_ids, !opts_.ignore_eos), in.max_tokens, engine_.config().max_seq_len}};
        emit(r);  // token 1, computed by the prefill worker
        if (r.why != StopReason::none) engine_.close(r.id);
        else running_.push_back(r);
        return true;
    }

    // One decode token per running sequence, one forward pass for all.
    void decode_step() {
        step_work_.clear();
        for (Running& r : running_) {
            if (!engine_.reserve(r.id, engine_.cached_len(r.id) + 1))
                fail("the decode worker's pool ran out of blocks (internal error: it holds max_seqs full requests)");
            step_work_.push_back({r.id, {&r.last_token, 1}, 1});
        }
        const float* logits = engine_.step(step_work_);
        const int vocab = engine_.config().vocab_size;
        for (std::size_t i = 0; i < running_.size(); i++) {
            running_[i].last_token = argmax(logits + i * std::size_t(vocab), vocab);
            emit(running_[i]);
        }
        std::erase_if(running_, [&](const Running& r) {
            if (r.why == StopReason::none) return false;
            engine_.close(r.id);
            return true;
        });
    }

    void emit(Running& r) {
        r.produced++;
        r.why = stop_after(r.stop, r.prompt_len, r.produced, r.last_token);
        outbox_.send(std::vector<int>{r.id, r.last_token, r.why != StopReason::none ? 1 : 0}, 0, kToken);
    }

    std::list<Incoming> incoming_;
    std::unordered_map<int, int> early_tokens_;  // request -> token 1, its header not seen yet
    std::vector<Running> running_;
    std::vector<SeqWork> step_work_;
};

}  // namespace

void run_decode_worker(std::shared_ptr<const Model> model, const KvCodec& codec, const WorkerOptions& o) {
    DecodeWorker(std::move(model), codec, o).run();
}

}  // namespace pd::serve::disagg
