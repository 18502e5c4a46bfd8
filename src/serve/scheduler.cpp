#include "serve/scheduler.hpp"

#include <algorithm>
#include <stdexcept>

#include "common.hpp"
#include "engine/sampler.hpp"

namespace pd::serve {

struct Scheduler::Sequence {
    int request = -1;               // Request::id
    std::vector<int> tokens;        // prompt, then output; capacity fixed at add()
    int prompt_len = 0;
    int prefill_end = 0;            // tokens its current run prefills: the prompt, or prompt + output
                                    // when it restarts after a preemption; past them it decodes
    FinishRule finish;              // when it ends, and its text
    Sampler sampler;                // its own temperature, top-p and random stream
    std::vector<int> verify;        // (1 + speculative k) its decode token, then the tokens proposed after it
    bool live = false;              // holds a request
    bool open = false;              // opened in the engine
};

// A decode row feeds the token sampled last (its remaining() is 1); a chunk
// of one token at a prompt's end (what a budget may leave of it) is still prefill.
static bool decodes(const SeqState& st, int prefill_end) { return st.computed >= prefill_end; }

void check_limits(const StepLimits& lim) {
    if (lim.max_seqs < 1) fail("--max-seqs must be at least 1, got {}", lim.max_seqs);
    if (lim.max_tokens_per_step < 1)
        fail("the token budget per step (--max-tokens-per-step) must be at least 1 token, got {}",
             lim.max_tokens_per_step);
}

Scheduler::Scheduler(ServingEngine& engine, StepPolicy& policy, SchedulerConfig cfg)
    : engine_(engine), policy_(policy), cfg_(std::move(cfg)) {
    check_limits(cfg_.limits);
    check_ngram(cfg_.speculative);
    if (cfg_.max_model_len < 1) fail("the context must hold at least 1 position");
}

Scheduler::~Scheduler() = default;

int Scheduler::free_id() {
    if (!free_ids_.empty()) {
        const int id = free_ids_.back();
        free_ids_.pop_back();
        return id;
    }
    pool_.emplace_back();
    states_.emplace_back();
    // Every per-step vector holds all sequences: steps never grow them.
    for (auto* v : {&free_ids_, &waiting_, &running_, &decided_, &admitted_, &preempted_}) v->reserve(pool_.size());
    batch_.reserve(pool_.size());
    items_.reserve(pool_.size());
    work_.reserve(pool_.size());
    events_.reserve(pool_.size() * std::size_t(1 + cfg_.speculative.k));  // a verify item emits up to 1 + k
    return int(pool_.size()) - 1;
}

void Scheduler::add(Request r, const Sampling& sampling, double arrival_s) {
    if (r.prompt.empty()) fail("request {} has an empty prompt", r.id);
    if (int(r.prompt.size()) > cfg_.max_model_len)
        fail("request {}: its prompt of {} tokens is longer than the context of {} positions",
             r.id, r.prompt.size(), cfg_.max_model_len);
    for (const Sequence& q : pool_)
        if (q.live && q.request == r.id) fail("request id {} is already queued", r.id);
    validate(sampling.sampler);
    if (cfg_.speculative.k > 0 && !is_greedy(sampling.sampler))
        fail("request {} samples at temperature {}, but speculative decoding here keeps exactly the tokens "
             "greedy decoding picks: send it with temperature 0, or turn speculation off (k = 0)",
             r.id, sampling.sampler.temperature);
    FinishRule finish;
    try {
        finish = FinishRule(cfg_.tokenizer, int(r.prompt.size()),
                            {{eos_ids(cfg_.eos_ids, !(sampling.ignore_eos || cfg_.ignore_eos)), r.max_tokens,
                              cfg_.max_model_len},
                             std::move(r.stop)});
    } catch (const UserError& e) {
        fail("request {}: {}", r.id, e.what());
    }
    const int id = free_id();
    Sequence& q = pool_[std::size_t(id)];
    q.request = r.id;
    q.prompt_len = int(r.prompt.size());
    q.tokens = std::move(r.prompt);
    q.tokens.reserve(std::size_t(std::min<long long>(
        (long long)q.prompt_len + r.max_tokens, (long long)cfg_.max_model_len + 1)));
    q.finish = std::move(finish);
    q.verify.resize(std::size_t(1 + cfg_.speculative.k));
    q.sampler = make_sampler(sampling.sampler, engine_.config().vocab_size);
    q.live = true;
    states_[std::size_t(id)] = SeqState{q.prompt_len, 0, false, arrival_s};
    waiting_.push_back(id);
}

bool Scheduler::cancel(int request_id) {
    for (std::size_t id = 0; id < pool_.size(); id++)
        if (pool_[id].live && pool_[id].request == request_id) {
            states_[id].cancelled = true;
            return true;
        }
    return false;
}

SchedulerState Scheduler::view() const { return {states_, waiting_, running_}; }

std::span<const TokenEvent> Scheduler::step() {
    events_.clear();
    admitted_.clear();
    preempted_.clear();
    items_.clear();
    counts_ = {};
    retire();
    admit();
    propose();
    batch_.clear();
    policy_.build_batch(view(), cfg_.limits, batch_);
    reserve_batch();
    if (!batch_.empty()) run_batch();
    return events_;
}

void Scheduler::retire() {
    decided_.clear();
    policy_.retire(view(), decided_);
    for (int id : decided_) {
        if (id < 0 || std::size_t(id) >= pool_.size() || !states_[std::size_t(id)].cancelled)
            throw std::logic_error("StepPolicy::retire named sequence " + std::to_string(id) +
                                   ", which is not a cancelled one");
        finish(id, FinishReason::cancelled, -1);
    }
}

void Scheduler::admit() {
    decided_.clear();
    policy_.admit(view(), cfg_.limits, decided_);
    if (int(running_.size() + decided_.size()) > cfg_.limits.max_seqs)
        throw std::logic_error("StepPolicy::admit let more than max_seqs sequences run");
    for (int id : decided_) {
        auto it = std::find(waiting_.begin(), waiting_.end(), id);
        if (it == waiting_.end())
            throw std::logic_error("StepPolicy::admit named sequence " + std::to_string(id) +
                                   ", which is not waiting");
        waiting_.erase(it);
        Sequence& q = pool_[std::size_t(id)];
        // A prefix cache may already hold the first blocks: they are not computed again.
        states_[std::size_t(id)].computed = engine_.open(id, q.tokens);
        q.prefill_end = int(q.tokens.size());
        q.open = true;
        running_.push_back(id);
        admitted_.push_back(q.request);
    }
}

// Each decode row's proposal: its last token, then what the n-gram lookup
// finds, no more than its output and the context have room for.
void Scheduler::propose() {
    for (int id : running_) {
        SeqState& st = states_[std::size_t(id)];
        Sequence& q = pool_[std::size_t(id)];
        st.proposed = 0;
        if (cfg_.speculative.k == 0 || !decodes(st, q.prefill_end)) continue;
        // A verify item gives up to 1 + proposed tokens; more than the request
        // may still emit, or than fit the context, would only be thrown away.
        const int room = q.finish.room() - 1;
        q.verify[0] = q.tokens.back();
        const auto out = std::span<int>(q.verify).subspan(1, std::size_t(std::clamp(room, 0, cfg_.speculative.k)));
        st.proposed = propose_ngram(q.tokens, cfg_.speculative, out);
    }
}

void Scheduler::reserve_batch() {
    for (std::size_t i = 0; i < batch_.size(); i++) {
        const auto [id, n] = batch_[i];
        const SeqState& st = states_[std::size_t(id)];
        const bool running = std::find(running_.begin(), running_.end(), id) != running_.end();
        if (!running || n < 1 || n > st.remaining() + st.proposed)
            throw std::logic_error("StepPolicy::build_batch: item (sequence " + std::to_string(id) +
                                   ", " + std::to_string(n) + " tokens) is not a running "
                                   "sequence's next 1..remaining (+ proposed) tokens");
        if (engine_.reserve(id, st.computed + n)) continue;
        if (n > st.remaining()) {  // proposed tokens never cost a preemption: this item without them
            batch_[i].n = st.remaining();
            i--;  // the loop's i++ tries it again
            continue;
        }
        // Out of blocks: the newest running sequence gives its blocks back and
        // waits to be recomputed. Items reserved so far stay valid (reserving
        // again is a no-op), so start over without the preempted sequence.
        const int victim = running_.back();
        if (running_.size() == 1)
            fail("request {} needs more KV-cache blocks than the engine has ({} blocks of {} positions); "
                 "give it more memory or shorten the request",
                 pool_[std::size_t(id)].request, engine_.total_blocks(), engine_.block_size());
        preempt(victim);
        std::erase_if(batch_, [&](const BatchItem& b) { return b.seq == victim; });
        i = std::size_t(-1);  // the loop's i++ makes it 0
    }
}

void Scheduler::preempt(int id) {
    engine_.close(id);
    pool_[std::size_t(id)].open = false;
    states_[std::size_t(id)].computed = 0;  // recompute: prompt and output go through prefill again
    states_[std::size_t(id)].proposed = 0;
    running_.erase(std::find(running_.begin(), running_.end(), id));
    waiting_.insert(waiting_.begin(), id);  // first in line when room returns
    counts_.preempted++;
    preempted_.push_back(pool_[std::size_t(id)].request);
}

void Scheduler::run_batch() {
    work_.clear();
    for (const auto& [id, n] : batch_) {
        const SeqState& st = states_[std::size_t(id)];
        const Sequence& q = pool_[std::size_t(id)];
        // Rows past the sequence's tokens are proposed ones: a verify item,
        // whose every row gets logits (row j scores the token after row j).
        const int proposed = n - st.remaining();
        if (proposed > 0)
            work_.push_back({id, std::span<const int>(q.verify).first(std::size_t(n)), n});
        else  // logits only where the item reaches the sequence's last token: they pick the next one
            work_.push_back({id, std::span<const int>(q.tokens).subspan(std::size_t(st.computed), std::size_t(n)),
                             st.computed + n == st.tokens ? 1 : 0});
        const bool decode = decodes(st, q.prefill_end);
        items_.push_back({q.request, n, st.computed, decode, std::max(0, proposed), 0});
        counts_.decode_rows += decode;
        counts_.speculative_rows += std::max(0, proposed);
        counts_.prefill_items += !decode;
        counts_.prefill_tokens += decode ? 0 : n;
    }
    spec_.decode_rows += counts_.decode_rows;
    const float* logits = engine_.step(work_);
    const std::size_t vocab = std::size_t(engine_.config().vocab_size);
    std::size_t row = 0;
    for (std::size_t i = 0; i < batch_.size(); i++) {
        const int id = batch_[i].seq, rows = work_[i].logit_rows;
        states_[std::size_t(id)].computed += batch_[i].n;
        if (rows > 1)
            verify(id, i, logits + vocab * row);
        else if (rows == 1)
            advance(id, logits + vocab * row);
        row += std::size_t(rows);
    }
}

// The next token (the request's sampler), then the finish rule.
void Scheduler::advance(int id, const float* logits) {
    emit(id, sample(pool_[std::size_t(id)].sampler, logits, engine_.config().vocab_size));
}

// Batch item `item` checked its proposed tokens: the greedy rule keeps them up
// to the first the model would not have picked and adds the model's own next
// token; each goes through the finish rule in turn, and the rows of the
// tokens not kept are rolled back (their K/V are overwritten later).
void Scheduler::verify(int id, std::size_t item, const float* logits) {
    Sequence& q = pool_[std::size_t(id)];
    const int proposed = items_[item].proposed, vocab = engine_.config().vocab_size;
    const Proposal pr{proposed, vocab, std::span<const int>(q.verify).subspan(1, std::size_t(proposed)),
                      {logits, std::size_t(proposed + 1) * std::size_t(vocab)}, {}, {}};
    const Verdict v = greedy_accept(pr, greedy_rng_);
    items_[item].accepted = v.accepted;
    spec_.verifies++;
    spec_.proposed += proposed;
    spec_.accepted += v.accepted;
    for (int j = 0; j <= v.accepted; j++) {
        spec_.emitted++;
        if (!emit(id, j < v.accepted ? q.verify[std::size_t(1 + j)] : v.next)) return;  // finished: closed
    }
    SeqState& st = states_[std::size_t(id)];
    st.computed = st.tokens - 1;  // the newest token is the next decode row
    engine_.truncate(id, st.computed);
}

// Appends `token` to sequence `id` and applies the finish rule: false when
// it ended the request (the sequence is closed then).
bool Scheduler::emit(int id, int token) {
    Sequence& q = pool_[std::size_t(id)];
    q.tokens.push_back(token);
    states_[std::size_t(id)].tokens++;
    TokenVerdict v = q.finish.push(token);
    if (v.finished != FinishReason::none) {
        finish(id, v.finished, token, std::move(v.text));
        return false;
    }
    events_.push_back({q.request, token, FinishReason::none, std::move(v.text)});
    return true;
}

void Scheduler::finish(int id, FinishReason why, int token, std::string text) {
    Sequence& q = pool_[std::size_t(id)];
    if (q.open) engine_.close(id);  // its blocks are free for this very step's successors
    std::erase(running_, id);
    std::erase(waiting_, id);
    events_.push_back({q.request, token, why, std::move(text)});
    q.live = q.open = false;
    states_[std::size_t(id)] = SeqState{};
    free_ids_.push_back(id);
}

}  // namespace pd::serve
