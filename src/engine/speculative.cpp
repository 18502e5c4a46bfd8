#include "engine/speculative.hpp"

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "engine/generate.hpp"
#include "engine/request.hpp"
#include "engine/stop_rule.hpp"
#include "base/timing.hpp"

namespace pd {

namespace {

std::span<const float> row(std::span<const float> m, int i, int n) {
    return m.subspan(std::size_t(i) * n, std::size_t(n));
}

}  // namespace

// ---- The accept rules --------------------------------------------------------

Verdict greedy_accept(const Proposal& pr, Rng&) {
    for (int i = 0; i < pr.k; i++) {
        const int want = argmax(row(pr.target_logits, i, pr.vocab).data(), pr.vocab);
        if (want != pr.draft[i]) return {i, want};  // the target's own token replaces the first miss
    }
    return {pr.k, argmax(row(pr.target_logits, pr.k, pr.vocab).data(), pr.vocab)};  // the bonus
}

Verdict sampling_accept(const Proposal& pr, Rng& rng) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int i = 0; i < pr.k; i++) {
        std::span<const float> p = row(pr.target_probs, i, pr.vocab), q = row(pr.draft_probs, i, pr.vocab);
        const int d = pr.draft[i];
        // Keep d with probability min(1, p(d)/q(d)): always where the target
        // likes d at least as much as the draft did. (q(d) > 0: d was drawn from q.)
        if (unit(rng) * q[d] < p[d]) continue;
        // Rejected: the mass p puts where the draft proposes too rarely.
        std::vector<float> residual(pr.vocab);
        for (int j = 0; j < pr.vocab; j++) residual[j] = std::max(0.0f, p[j] - q[j]);
        return {i, draw_from(residual, rng)};
    }
    return {pr.k, draw_from(row(pr.target_probs, pr.k, pr.vocab), rng)};
}

namespace {

// softmax(logits / T) over every id: no ranking needed without top-k or top-p.
void full_softmax(const float* logits, int n, float temperature, std::span<float> out) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (out[i] = std::exp((logits[i] - mx) / temperature));
    for (int i = 0; i < n; i++) out[i] = float(out[i] / sum);
}

}  // namespace

void sampling_distribution(const float* logits, int n, const SamplerConfig& cfg, std::span<float> out) {
    if (!(cfg.temperature > 0.0f)) fail("a sampling distribution needs a temperature above 0, got {}", cfg.temperature);
    const int k = cfg.top_k > 0 ? std::min(cfg.top_k, n) : n;
    if (k == n && cfg.top_p >= 1.0f) return full_softmax(logits, n, cfg.temperature, out);
    // Candidates: the top-k ids by logit, best first (ties: lower id), as pd::sample ranks them.
    std::vector<int> order(n);
    rank_top_k(logits, n, k, order);
    std::fill(out.begin(), out.end(), 0.0f);
    double sum = 0.0;
    for (int i = 0; i < k; i++) sum += (out[order[i]] = std::exp((logits[order[i]] - logits[order[0]]) / cfg.temperature));
    // Nucleus: the smallest prefix (best first) whose mass reaches top_p.
    int keep = k;
    double acc = 0.0;
    for (int i = 0; i < k && cfg.top_p < 1.0f; i++) {
        acc += out[order[i]] / sum;
        if (acc >= cfg.top_p) {
            keep = i + 1;
            break;
        }
    }
    double mass = 0.0;
    for (int i = 0; i < keep; i++) mass += out[order[i]];
    for (int i = 0; i < k; i++) out[order[i]] = i < keep ? float(out[order[i]] / mass) : 0.0f;
}

int draw_from(std::span<const float> probs, Rng& rng) {
    double total = 0.0;
    for (float v : probs) total += v;
    if (!(total > 0.0)) fail("cannot draw a token from a distribution with no mass");
    double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    int last_nonzero = 0;
    for (std::size_t i = 0; i < probs.size(); i++) {
        if (probs[i] <= 0.0f) continue;
        last_nonzero = int(i);
        u -= probs[i];
        if (u < 0.0) return int(i);
    }
    return last_nonzero;  // u landed on the rounding error at the end
}

// ---- The loop ----------------------------------------------------------------

void check_speculation(const Engine& target, const Engine& draft, std::size_t prompt_len,
                       const SpeculativeOptions& o) {
    const Config &t = target.config(), &d = draft.config();
    if (t.vocab_size != d.vocab_size)
        fail("the draft model's vocabulary has {} ids but the target's has {}: speculative decoding "
             "compares the two models id by id, so they must share one tokenizer (tiny-draft "
             "shares tiny's)", d.vocab_size, t.vocab_size);
    if (o.k < 1) fail("--speculate must be at least 1 draft token per target pass, got {}", o.k);
    if (prompt_len == 0) fail("the prompt is empty: give --prompt TEXT or --prompt-ids LIST");
    if (o.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0, got {}", o.max_new_tokens);
    const std::int64_t context = std::min(t.max_seq_len, d.max_seq_len);
    if (std::int64_t(prompt_len) + o.k > context)
        fail("the prompt ({} tokens) plus {} draft tokens need {} positions, more than the context "
             "length of {}: lower --speculate or shorten the prompt", prompt_len, o.k,
             std::int64_t(prompt_len) + o.k, context);
    const std::int64_t need = generate_positions(prompt_len, o.max_new_tokens);
    const int room = std::min(target.max_seq(), draft.max_seq());
    if (need > room)
        fail("the prompt ({} tokens) plus {} new tokens need {} positions, more than the context "
             "length of {}: shorten the prompt or lower -n", prompt_len, o.max_new_tokens, need, room);
}

namespace {

// One speculative generation in progress. Invariant between rounds: the
// sequence is prompt + generated; the target's cache holds all of it but
// `last`, the draft's all of it but `pending` (1 token, or 2 after a round
// that kept every draft token: the draft never saw dk).
struct Run {
    Engine &target, &draft;
    const SpeculativeOptions& o;
    AcceptRule rule;
    const std::function<void(int)>& on_token;
    Rng rng;
    int V = 0;
    bool greedy = true;
    int last = 0;
    std::vector<int> pending;
    std::vector<int> proposal;    // (k) d1..dk
    std::vector<float> q;         // (k, V) draft probabilities (sampling)
    std::vector<float> logits;    // (k+1, V) the verify pass's rows
    std::vector<float> p;         // (k+1, V) target probabilities (sampling)
    int prompt_len = 0;
    StopLimits stop;              // EOS and max_new_tokens (check_speculation keeps the context from ending it)
    SpeculativeResult res;
};

// A token from one row of logits: argmax, or a draw from the sampler's
// distribution, which is kept in `probs` for the rule.
int choose(Run& r, const float* row_logits, float* probs) {
    if (r.greedy) return argmax(row_logits, r.V);
    std::span<float> out(probs, std::size_t(r.V));
    sampling_distribution(row_logits, r.V, r.o.sampler, out);
    return draw_from(out, r.rng);
}

// Both models read the prompt; the target's last row picks token 1.
void start(Run& r, std::span<const int> prompt) {
    const int slot = r.o.slot;
    r.target.reset(slot);
    r.draft.reset(slot);
    const float* out = nullptr;
    r.res.stats.prefill_ms += r.target.time_ms([&] { out = r.target.prefill(slot, prompt); });
    r.res.stats.prefill_ms += r.draft.time_ms([&] { r.draft.prefill(slot, prompt); });
    r.res.stats.target_passes = r.res.stats.draft_passes = 1;
    r.p.resize(std::size_t(r.V));
    r.last = choose(r, out, r.p.data());
    r.pending = {r.last};
}

// The draft proposes k tokens, one pass each; the first pass also catches up on `pending`.
void propose(Run& r, int k) {
    const int slot = r.o.slot;
    r.proposal.resize(std::size_t(k));
    r.q.resize(std::size_t(k) * r.V);
    for (int i = 0; i < k; i++) {
        const float* out = nullptr;
        r.res.stats.draft_ms += r.draft.time_ms([&] {
            if (i > 0) out = r.draft.decode({&slot, 1}, {&r.proposal[i - 1], 1});
            else if (r.pending.size() == 1) out = r.draft.decode({&slot, 1}, {r.pending.data(), 1});
            else out = r.draft.prefill(slot, r.pending);
        });
        r.res.stats.draft_passes++;
        r.proposal[i] = choose(r, out, r.q.data() + std::size_t(i) * r.V);
    }
}

// ONE target pass over [last, d1..dk]: k+1 rows of logits. Then the rule.
Verdict verify(Run& r, int k) {
    const int slot = r.o.slot;
    std::vector<int> rows = {r.last};
    rows.insert(rows.end(), r.proposal.begin(), r.proposal.end());
    const float* out = nullptr;
    r.res.stats.target_ms += r.target.time_ms([&] { out = r.target.prefill(slot, rows, Keep::all); });
    r.res.stats.target_passes++;
    const double t0 = now_ms();
    r.logits.assign(out, out + std::size_t(k + 1) * r.V);
    if (!r.greedy) {
        r.p.resize(r.logits.size());
        for (int i = 0; i <= k; i++)
            sampling_distribution(r.logits.data() + std::size_t(i) * r.V, r.V, r.o.sampler,
                                  std::span<float>(r.p).subspan(std::size_t(i) * r.V, std::size_t(r.V)));
    }
    Proposal pr{k, r.V, r.proposal, r.logits, r.greedy ? std::span<const float>{} : r.p,
                r.greedy ? std::span<const float>{} : r.q};
    Verdict v = r.rule(pr, r.rng);
    if (v.accepted < 0 || v.accepted > k || v.next < 0 || v.next >= r.V)
        fail("the accept rule returned {} accepted and next token {}; it must keep 0 to {} draft "
             "tokens and return a token id from 0 to {}", v.accepted, v.next, k, r.V - 1);
    r.res.stats.rule_ms += now_ms() - t0;
    return v;
}

// Hands out d1..da and `next`; false once the run is over (eos or enough tokens).
bool emit(Run& r, const Verdict& v) {
    for (int i = 0; i <= v.accepted; i++) {
        const int tok = i < v.accepted ? r.proposal[i] : v.next;
        r.res.generated_ids.push_back(tok);
        if (r.on_token) r.on_token(tok);
        const StopReason why = stop_after(r.stop, r.prompt_len, int(r.res.generated_ids.size()), tok);
        if (why != StopReason::none) {
            r.res.stopped_at_eos = why == StopReason::eos;
            return false;
        }
    }
    return true;
}

// Forget what the rule rejected: both caches end after d_a; `next` is fed next
// round. Only between rounds, so k >= 1 (a round of k = 0 is the last).
void roll_back(Run& r, const Verdict& v, int k, int target_len_before) {
    const double t0 = now_ms();
    const int slot = r.o.slot;
    const int kept = target_len_before + 1 + v.accepted;  // ... last, d1..da
    r.target.truncate(slot, kept);
    if (v.accepted < k) {
        r.draft.truncate(slot, kept);  // the draft saw last, d1..d(k-1)
        r.pending = {v.next};
    } else {
        r.pending = {r.proposal[k - 1], v.next};  // dk was never fed to the draft
    }
    r.last = v.next;
    r.res.stats.rule_ms += now_ms() - t0;
}

}  // namespace

SpeculativeResult speculative_generate(Engine& target, Engine& draft, std::span<const int> prompt,
                                       const SpeculativeOptions& opts, const AcceptRule& rule,
                                       const std::function<void(int)>& on_token) {
    check_speculation(target, draft, prompt.size(), opts);
    check_tokens(target.config(), prompt);
    validate(opts.sampler);
    const bool greedy = is_greedy(opts.sampler);
    AcceptRule chosen = rule ? rule : (greedy ? AcceptRule(greedy_accept) : AcceptRule(sampling_accept));
    Run r{target, draft, opts, std::move(chosen), on_token, Rng(opts.sampler.seed),
          target.config().vocab_size, greedy, 0, {}, {}, {}, {}, {}, int(prompt.size()),
          {eos_ids(target.config().eos_ids, opts.stop_at_eos), opts.max_new_tokens, std::min(target.max_seq(), draft.max_seq())},
          {}};
    if (opts.max_new_tokens == 0) return r.res;

    const double t_start = now_ms();
    start(r, prompt);
    bool more = emit(r, {0, r.last});
    while (more) {
        // Never propose past the tokens still wanted: the cache is sized for them.
        const int k = std::min(opts.k, opts.max_new_tokens - int(r.res.generated_ids.size()) - 1);
        const int target_len = target.cache_len(opts.slot);
        propose(r, k);
        Verdict v = verify(r, k);
        r.res.stats.rounds++;
        r.res.stats.proposed += k;
        r.res.stats.accepted += v.accepted;
        r.res.stats.rejections += v.accepted < k;
        more = emit(r, v);
        if (more) roll_back(r, v, k, target_len);
    }
    r.res.total_ms = now_ms() - t_start;
    return r.res;
}

}  // namespace pd
