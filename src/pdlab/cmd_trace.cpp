// pdlab trace: the prefill/decode trace, one row per forward pass.
#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"
#include "engine/generate.hpp"

namespace pd::cli {

// What `pdlab trace --help` says before the options.
constexpr const char* kTraceAbout = R"(Trace greedy generation phase by phase: how many tokens each forward pass consumed, how
the cache grew, the usable K/V shape [B, H_kv, S, D] per layer, and which position's
logits chose each output token. Prefill produces token 1; each decode step one more.
Example: pdlab trace --model synthetic:mha-h8-d64 --prompt-ids 1,2,3,4 -n 2)";

Command add_trace(CLI::App& app) {
    struct Opts {
        CommonOptions common;
        PromptOptions prompt;
        int n = 2;
        bool no_cache = false;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("trace", kTraceAbout);
    add_common(sub, o->common, false);
    add_prompt(sub, o->prompt);
    sub->add_option("-n,--max-new-tokens", o->n, "tokens to generate")->check(CLI::Range(0, 1 << 20).description("(0 or more)"))->capture_default_str();
    sub->add_flag("--no-cache", o->no_cache, "recompute everything each step (no KV cache)");
    return {sub, [o]() {
        Session s = load_session(o->common);
        std::vector<int> ids = prompt_ids(o->prompt, s.loaded.tokenizer);
        start_engine(s, o->common, 1, generate_positions(ids.size(), o->n));
        const Config& c = s.engine->config();
        GenerateOptions g;
        g.max_new_tokens = o->n;
        g.use_cache = !o->no_cache;
        g.stop_at_eos = false;
        GenerateResult r = generate(*s.engine, ids, g);
        std::printf("model %s (%s): %d layers, %d query heads, %d KV heads, head_dim %d; cache per "
                    "layer K and V [B, H_kv, S, D]\n",
                    o->common.model.c_str(), family_name(c.family), c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim);
        std::printf("prompt: %zu tokens [%s]\n\n", ids.size(), fmt::format("{}", fmt::join(ids, ", ")).c_str());
        std::fputs(format_trace(r.trace).c_str(), stdout);
        std::printf("\noutput: [%s] \"%s\"\n", fmt::format("{}", fmt::join(r.generated_ids, ", ")).c_str(),
                    s.loaded.tokenizer.decode(r.generated_ids).c_str());
        std::printf("final cache length %d = prompt %zu + %zu generated - 1 (the last token is not fed back)\n",
                    s.engine->cache_len(0), ids.size(), r.generated_ids.size());
        return 0;
    }};
}

}  // namespace pd::cli
