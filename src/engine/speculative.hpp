// Speculative decoding: a small draft model guesses k tokens one by one, the
// target model scores all k in ONE pass over its cache, and an accept rule
// keeps a prefix of the guesses plus one token of the target's own.
//
//   round:  draft   last -> d1 -> d2 ... -> dk        k cheap decode steps
//           target  prefill([last, d1..dk], Keep::all) -> k+1 rows of logits
//                   row i scores the token after d1..di (row 0: after last)
//           rule    keep d1..da (0 <= a <= k), then `next` from row a
//           both caches are rolled back (Engine::truncate) past d_a
//
// Why it pays: decode is memory-bound, so k+1 rows through the target cost
// about what one row does (every weight is read once either way), and each
// target pass now yields 1 to k+1 tokens. The greedy rule gives exactly the
// target's greedy tokens; the sampling rule gives exactly the target's
// distribution (Leviathan et al. 2023, Chen et al. 2023), whatever the draft.
#pragma once

#include <functional>
#include <random>
#include <span>
#include <vector>

#include "engine/engine.hpp"
#include "engine/sampler.hpp"

namespace pd {

// What an accept rule sees after one verify pass.
struct Proposal {
    int k = 0;                              // draft tokens proposed (0 only on a last, single-token round)
    int vocab = 0;
    std::span<const int> draft;             // (k) d1..dk
    std::span<const float> target_logits;   // (k+1, vocab) row i: the target's logits for the token after d1..di
    std::span<const float> target_probs;    // (k+1, vocab) p: those rows as the sampler's distribution; empty when greedy
    std::span<const float> draft_probs;     // (k, vocab) q: row i is the distribution d(i+1) was drawn from; empty when greedy
};

// A rule's decision: keep draft tokens d1..d(accepted), then emit `next`.
struct Verdict {
    int accepted = 0;  // 0..k
    int next = 0;      // the target's token at position `accepted`: a correction, or the bonus when all k were kept
};

using Rng = std::mt19937_64;
using AcceptRule = std::function<Verdict(const Proposal&, Rng&)>;

// Greedy: the longest prefix of the draft equal to the target's argmax at each
// row, then the target's argmax at the first row that disagrees (or row k).
Verdict greedy_accept(const Proposal& pr, Rng& rng);

// Sampling: keep d(i+1) with probability min(1, p_i(d) / q_i(d)); on the
// first rejection draw `next` from norm(max(0, p_i - q_i)); when all k are
// kept draw the bonus from p_k. The tokens it emits follow p exactly.
Verdict sampling_accept(const Proposal& pr, Rng& rng);

// The distribution pd::sample draws from (temperature > 0): softmax(logits/T)
// on the top-k ids, cut to the smallest top-p prefix, renormalised; zero on
// every other id. out: (n).
void sampling_distribution(const float* logits, int n, const SamplerConfig& cfg, std::span<float> out);

// One id drawn with probability probs[i] / sum(probs) (probs need not sum to 1).
int draw_from(std::span<const float> probs, Rng& rng);

struct SpeculativeOptions {
    int k = 4;                 // draft tokens per target pass
    int max_new_tokens = 32;
    SamplerConfig sampler;     // temperature 0: greedy, the draft and the rule too
    bool stop_at_eos = true;
    int slot = 0;              // the sequence slot, on both engines
};

struct SpeculativeStats {
    int rounds = 0;            // draft-verify-accept rounds (one verify pass each)
    int proposed = 0;          // draft tokens the target scored
    int accepted = 0;          // of those, kept
    int rejections = 0;        // rounds that ended at a rejected draft token (the others kept all they proposed)
    int target_passes = 0;     // the prompt's prefill + one per round
    int draft_passes = 0;      // the prompt's prefill + one per proposed token (+ catch-ups)
    double prefill_ms = 0;     // both models' prompt passes
    double draft_ms = 0;       // draft passes after the prompt (engine.time_ms)
    double target_ms = 0;      // verify passes (engine.time_ms)
    double rule_ms = 0;        // turning logits into probabilities, the rule, the roll-back
    // The fraction of proposed tokens kept. Not the per-token probability
    // alpha: every token after a round's first rejection counts as not kept
    // although the target never judged it, so this falls with k at a fixed alpha.
    double acceptance_rate() const { return proposed ? double(accepted) / proposed : 0.0; }
    // alpha, the probability that the target keeps a draft token it judges:
    // kept / judged, where the judged tokens are the kept ones plus one per
    // rejection. This is what 1 + alpha + ... + alpha^k needs.
    double per_token_acceptance() const {
        return accepted + rejections ? double(accepted) / (accepted + rejections) : 0.0;
    }
};

struct SpeculativeResult {
    std::vector<int> generated_ids;
    SpeculativeStats stats;
    double total_ms = 0;       // wall clock, prompt passes included
    bool stopped_at_eos = false;
    // Generated tokens per target pass: 1 for plain decoding, up to k+1 here.
    double tokens_per_target_pass() const {
        return stats.target_passes ? double(generated_ids.size()) / stats.target_passes : 0.0;
    }
};

// UserError unless the pair can speculate on `prompt_len` tokens: one
// vocabulary (the rule compares the two models id by id), k >= 1, prompt + k
// within both contexts, and prompt + max_new_tokens - 1 within both caches.
void check_speculation(const Engine& target, const Engine& draft, std::size_t prompt_len,
                       const SpeculativeOptions& opts);

// Generates like pd::generate (the slot is reset first on both engines;
// `on_token` sees each token as it is kept), speculating k tokens per round.
// `rule` defaults to greedy_accept at temperature 0, else sampling_accept.
SpeculativeResult speculative_generate(Engine& target, Engine& draft, std::span<const int> prompt,
                                       const SpeculativeOptions& opts, const AcceptRule& rule = {},
                                       const std::function<void(int)>& on_token = {});

}  // namespace pd
