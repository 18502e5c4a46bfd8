// Choosing the next token from logits: greedy, or sampling with temperature,
// top-k and top-p, reproducible from a seed.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace pd {

struct SamplerConfig {
    float temperature = 0.0f;  // 0 means greedy (argmax)
    int top_k = 0;             // 0: no limit
    float top_p = 1.0f;        // 1: no limit
    std::uint64_t seed = 42;
};

// Checks ranges; fails with a UserError naming the flag.
void validate(const SamplerConfig& s);

struct Sampler {
    SamplerConfig cfg;
    std::mt19937_64 rng;
    std::vector<int> order;     // (vocab) candidate ids, sorted by logit
    std::vector<float> probs;   // (vocab) their probabilities
};

Sampler make_sampler(const SamplerConfig& cfg, int vocab_size);

// Index of the largest logit (the first one on ties).
int argmax(const float* logits, int n);

// order[0..k): the ids of the k largest logits, best first, ties to the lower
// id. A total order, so the ranking is the same whatever sort produces it.
// order: (n); only order[0..k) is written.
void rank_top_k(const float* logits, int n, int k, std::span<int> order);

// Whether sample() takes the argmax (temperature 0): callers that know it
// can ask the engine for the token alone (Engine::decode_greedy).
inline bool is_greedy(const SamplerConfig& s) { return s.temperature == 0.0f; }

// The next token: argmax when temperature is 0, else a draw from
// softmax(logits / temperature) restricted to the top-k ids and then to the
// smallest set whose probability reaches top-p.
int sample(Sampler& s, const float* logits, int n);

}  // namespace pd
