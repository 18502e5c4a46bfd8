// Lab 02, section 1: the classic trace of a P-token prompt and two greedy
// output tokens, with the cache length and K/V shape after every pass.
#include <algorithm>
#include <cstdio>

#include <fmt/ranges.h>

#include "engine/sampler.hpp"
#include "exercise.hpp"
#include "lab02.hpp"
#include "print.hpp"

namespace pd::lab02 {

namespace ex = pd::lab02;

namespace {

// "t1, t2, t3, t4" for short prompts, "t1..t128" for long ones.
std::string prompt_names(int P) {
    if (P <= 6) {
        std::vector<std::string> n;
        for (int i = 1; i <= P; i++) n.push_back(fmt::format("t{}", i));
        return fmt::format("{}", fmt::join(n, ", "));
    }
    return fmt::format("t1..t{}", P);
}

void print_trace_row(int step, const std::string& what, const std::string& tokens, const std::string& len,
                     const std::string& shape, const std::string& owner) {
    std::printf("   %-4d %-52s %-22s %-13s %-16s %s\n", step, what.c_str(), tokens.c_str(), len.c_str(),
                shape.c_str(), owner.c_str());
}

// Prefill, then two decode steps through the student's decode_loop (1 step each).
struct Trace {
    int g1, g2, g3, len_prefill, len_1, len_2;
};
Trace run_trace(Lab& lab) {
    Engine& engine = lab.engine;
    engine.reset(0);
    Trace t{};
    t.g1 = argmax(engine.prefill(0, lab.ids), engine.config().vocab_size);
    t.len_prefill = engine.cache_len(0);
    std::vector<double> ms;
    auto one_step = [&](int token) {
        std::vector<int> out = ex::decode_loop(engine, 0, token, 1, ms);
        if (out.size() != 1 || ms.size() != 1)
            fail("decode_loop(steps = 1) returned {} tokens and {} times; expected exactly 1 of each", out.size(),
                 ms.size());
        return out[0];
    };
    t.g2 = one_step(t.g1);
    t.len_1 = engine.cache_len(0);
    t.g3 = one_step(t.g2);
    t.len_2 = engine.cache_len(0);
    return t;
}

void print_trace(const Lab& lab, const Trace& t) {
    const int P = lab.P();
    const std::string tp = prompt_names(P), upto = P <= 6 ? tp : fmt::format("t1..t{}", P);
    std::printf("   %-4s %-52s %-22s %-13s %-16s %s\n", "Step", "What happens", "Prompt tokens", "Cache length",
                "K/V shape", "First-token ownership");
    print_trace_row(0, "prompt tokens available, nothing computed yet", tp, "-", "-", "-");
    print_trace_row(1, fmt::format("prefill: all {} tokens in ONE pass, K/V of all cached", P), tp,
                    fmt::format("P = {}", t.len_prefill), lab.kv(t.len_prefill),
                    fmt::format("t{}'s logits produce g1 (id {})", P, t.g1));
    print_trace_row(2, fmt::format("decode 1: feed g1; it attends to {} cached + its own", P), upto + ", g1",
                    fmt::format("P+1 = {}", t.len_1), lab.kv(t.len_1), fmt::format("g1's logits produce g2 (id {})", t.g2));
    print_trace_row(3, fmt::format("decode 2: feed g2; it attends to {} cached + its own", P + 1), upto + ", g1, g2",
                    fmt::format("P+2 = {}", t.len_2), lab.kv(t.len_2),
                    fmt::format("g2's logits produce the next output (id {})", t.g3));
    std::printf("   output g1 g2 g3 = ids [%d, %d, %d] = %s %s %s\n", t.g1, t.g2, t.g3,
                lab::quoted_token(lab.tok, t.g1).c_str(), lab::quoted_token(lab.tok, t.g2).c_str(),
                lab::quoted_token(lab.tok, t.g3).c_str());
    std::printf("   Shapes: prefill writes K/V %s in every layer; each decode step feeds one token id [B, 1] =\n"
                "   [1, 1] and writes new K/V [B, H_kv, 1, D] = %s, one more column of the cache.\n",
                lab.kv(P).c_str(), lab.kv(1).c_str());
    std::printf("   No extra pass produces output token 1: the prefill pass already ended with t%d's logits, which\n"
                "   chose g1. Decode step 1 CONSUMES g1 and produces g2. Cache: %d -> %d -> %d.\n", P, t.len_prefill,
                t.len_1, t.len_2);
}

}  // namespace

bool section_trace(Lab& lab) {
    const int P = lab.P();
    std::printf("1. The trace: a %d-token prompt and two greedy output tokens (B = 1)\n", P);
    std::string text;
    for (int i = 0; i < std::min(P, 8); i++) {
        text += ' ';  // not " " + token: GCC 12 warns (-Wrestrict) about that temporary, wrongly
        text += lab::quoted_token(lab.tok, lab.ids[std::size_t(i)]);
    }
    std::printf("   prompt %s = ids [%s] =%s%s\n", prompt_names(P).c_str(), lab::id_list(lab.ids).c_str(),
                text.c_str(), P > 8 ? " ..." : "");
    const Trace t = run_trace(lab);
    std::printf("   prefill ran: cache length %d; t%d's logits chose g1 = id %d. Decode steps 1 and 2 ran in your "
                "decode_loop.\n", t.len_prefill, P, t.g1);
    print_trace(lab, t);
    GenerateOptions g;
    g.max_new_tokens = 3;
    g.stop_at_eos = false;
    const bool lengths_ok = t.len_prefill == P && t.len_1 == P + 1 && t.len_2 == P + 2;
    const bool same = generate(lab.engine, lab.ids, g).generated_ids == std::vector<int>{t.g1, t.g2, t.g3};
    std::printf("   check: cache lengths %s; tokens %s the engine's own generate()\n\n",
                lengths_ok ? "P, P+1, P+2 as expected" : "WRONG (expected P, P+1, P+2)", same ? "match" : "DO NOT match");
    lab.js["trace"] = {{"prompt_ids", lab.ids}, {"output_ids", {t.g1, t.g2, t.g3}},
                       {"cache_lengths", {t.len_prefill, t.len_1, t.len_2}},
                       {"kv_shapes", {lab.kv(t.len_prefill), lab.kv(t.len_1), lab.kv(t.len_2)}},
                       {"ok", lengths_ok && same}};
    return lengths_ok && same;
}

}  // namespace pd::lab02
