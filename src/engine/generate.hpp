// The generation loop: prefill the prompt once, then decode token by token,
// recording a trace of every phase and how long each took.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "engine/sampler.hpp"

namespace pd {

struct GenerateOptions {
    int max_new_tokens = 32;
    SamplerConfig sampler;       // temperature 0 = greedy
    bool use_cache = true;       // false: recompute the whole sequence every step
    bool stop_at_eos = true;     // stop when the model emits any of its EOS ids (Config::eos_ids)
    int slot = 0;                // which cache slot (sequence) to use
};

// One row of the prefill/decode trace.
struct TraceRow {
    std::string phase;           // "prefill", "decode 1", ... ("recompute 1" without cache)
    int tokens_in = 0;           // tokens this forward pass consumed
    int cache_before = 0;        // usable cache length before / after the pass
    int cache_after = 0;
    std::string kv_shape;        // usable K (= V) shape after the pass, "[1, 8, 5, 64]"
    int logits_pos = 0;          // position whose logits chose the token
    int logits_token = 0;        // the token at that position
    int token_out = 0;           // the token chosen
    double ms = 0;               // model-side time of the pass
};

struct GenerateResult {
    std::vector<int> prompt_ids, generated_ids;
    std::vector<TraceRow> trace;
    double prefill_ms = 0;            // model-side prefill (or first recompute)
    std::vector<double> decode_ms;    // model-side time of each later step
    double ttft_ms = 0;               // start of prefill to first token chosen (sampling included)
    double tpot_ms = 0;               // (total - ttft) / (tokens - 1)
    double total_ms = 0;
    bool stopped_at_eos = false;
};

// Runs the loop on `engine`; `on_token` sees each token as soon as it is chosen
// (for streaming). The prompt must fit: prompt + max_new_tokens - 1 <= context
// (the last new token is never fed back). The slot is reset first.
GenerateResult generate(Engine& engine, std::span<const int> prompt, const GenerateOptions& opts,
                        const std::function<void(int)>& on_token = {});

// Cache positions that generating `max_new_tokens` after a prompt of
// `prompt_len` takes: P + n - 1 (the last new token is never fed back), at least P.
std::int64_t generate_positions(std::size_t prompt_len, int max_new_tokens);

// The trace as an aligned text table.
std::string format_trace(const std::vector<TraceRow>& rows);

}  // namespace pd
