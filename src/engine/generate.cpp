#include "engine/generate.hpp"

#include <algorithm>

#include "engine/request.hpp"
#include "engine/stop_rule.hpp"
#include "base/timing.hpp"

namespace pd {

GenerateResult generate(Engine& engine, std::span<const int> prompt, const GenerateOptions& opts,
                        const std::function<void(int)>& on_token) {
    const Config& c = engine.config();
    if (prompt.empty()) fail("the prompt is empty: give --prompt TEXT or --prompt-ids LIST");
    if (opts.max_new_tokens < 0) fail("the number of tokens to generate must be >= 0, got {}", opts.max_new_tokens);
    check_tokens(c, prompt);
    // The last new token is sampled, never fed back: it takes no position.
    const std::int64_t need = generate_positions(prompt.size(), opts.max_new_tokens);
    if (need > engine.max_seq())
        fail("the prompt ({} tokens) plus {} new tokens need {} positions (the last new token is "
             "never fed back), more than the context length of {} (the model's, or "
             "--max-seq): shorten the prompt or lower -n",
             prompt.size(), opts.max_new_tokens, need, engine.max_seq());

    GenerateResult res;
    res.prompt_ids.assign(prompt.begin(), prompt.end());
    Sampler sampler = make_sampler(opts.sampler, c.vocab_size);
    const bool greedy = is_greedy(opts.sampler);
    const int slot = opts.slot;
    engine.reset(slot);
    std::vector<int> seq(prompt.begin(), prompt.end());  // every token so far (for no-cache mode)
    const StopLimits stop{eos_ids(c.eos_ids, opts.stop_at_eos), opts.max_new_tokens, engine.max_seq()};
    const double t_start = now_ms();

    // Until the stop rule ends it (the check above keeps the context from doing so).
    for (int step = 0; opts.max_new_tokens > 0; step++) {
        TraceRow row;
        const float* logits = nullptr;
        int next = 0;
        if (step == 0 || !opts.use_cache) {
            // Prefill (or, without a cache, a full recompute of everything so far).
            engine.reset(slot);
            row.phase = step == 0 ? "prefill" : fmt::format("recompute {}", step);
            row.cache_before = 0;
            row.tokens_in = int(seq.size());
            row.ms = engine.time_ms([&] { logits = engine.prefill(slot, seq); });
        } else {
            // Decode: only the newest token goes through the model.
            row.phase = fmt::format("decode {}", step);
            row.cache_before = engine.cache_len(slot);
            row.tokens_in = 1;
            int tok = seq.back();
            // Greedy decoding needs only the argmax: the GPU finds it on the
            // device and copies back one int, not the logits (engine.hpp).
            if (greedy) row.ms = engine.time_ms([&] { engine.decode_greedy({&slot, 1}, {&tok, 1}, {&next, 1}); });
            else row.ms = engine.time_ms([&] { logits = engine.decode({&slot, 1}, {&tok, 1}); });
        }
        row.cache_after = engine.cache_len(slot);
        row.kv_shape = fmt::format("[1, {}, {}, {}]", c.n_kv_heads, row.cache_after, c.head_dim);
        row.logits_pos = int(seq.size()) - 1;
        row.logits_token = seq.back();
        if (logits) next = sample(sampler, logits, c.vocab_size);
        row.token_out = next;
        if (step == 0) {
            res.prefill_ms = row.ms;
            res.ttft_ms = now_ms() - t_start;
        } else {
            res.decode_ms.push_back(row.ms);
        }
        res.trace.push_back(row);
        res.generated_ids.push_back(next);
        seq.push_back(next);
        if (on_token) on_token(next);
        const StopReason why = stop_after(stop, int(prompt.size()), step + 1, next);
        if (why != StopReason::none) {
            res.stopped_at_eos = why == StopReason::eos;
            break;
        }
    }
    res.total_ms = now_ms() - t_start;
    if (res.generated_ids.size() > 1)
        res.tpot_ms = (res.total_ms - res.ttft_ms) / double(res.generated_ids.size() - 1);
    return res;
}

std::int64_t generate_positions(std::size_t prompt_len, int max_new_tokens) {
    return std::int64_t(prompt_len) + std::max(max_new_tokens - 1, 0);
}

std::string format_trace(const std::vector<TraceRow>& rows) {
    std::string out = fmt::format("{:<13} {:>9} {:>14} {:<16} {:>18} {:>9} {:>9}\n", "phase",
                                  "tokens in", "cache len", "K/V shape", "logits of pos(tok)",
                                  "token out", "ms");
    for (auto& r : rows)
        out += fmt::format("{:<13} {:>9} {:>14} {:<16} {:>18} {:>9} {:>9.3f}\n", r.phase, r.tokens_in,
                           fmt::format("{} -> {}", r.cache_before, r.cache_after), r.kv_shape,
                           fmt::format("{} ({})", r.logits_pos, r.logits_token), r.token_out, r.ms);
    return out;
}

}  // namespace pd
