// Lab 15: your forward pass against the engine's.
//   1. The same prompt through both, greedy: every step's logits compared, the
//      first step whose token or logits differ printed (exit 1 if any).
//   2. Per phase (prefill: the prompt in one call; decode: one token a call),
//      the time of both and the share of each piece: norms, products,
//      attention, MLP and the rest. Yours from the marks your code makes
//      (exercise.hpp's PieceClock), the engine's from its timeline's layer
//      spans (base/timeline.hpp): the same clock, the same pieces.
// CPU only: the engine's CUDA twin is not part of this lab.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/timeline.hpp"
#include "base/timing.hpp"
#include "exercise.hpp"
#include "lab_main.hpp"
#include "print.hpp"

using namespace pd;
namespace ex = pd::lab15;
using nlohmann::json;

namespace {

struct Options {
    cli::CommonOptions common;
    std::string prompt = "One day, Lily went to the park. She saw a";
    int steps = 32;
};

// The time of one phase (prefill or decode, all its calls), split into pieces.
struct PhaseTime {
    double total_ms = 0;
    std::array<double, ex::kPieces> piece_ms{};
};

// One side's run: the generated ids, each step's logits, the two phases.
struct Run {
    std::vector<int> ids;
    std::vector<std::vector<float>> logits;  // (steps, vocab)
    PhaseTime prefill, decode;
};

int argmax(const float* v, int n) { return int(std::max_element(v, v + n) - v); }

// Greedy with your forward: one call for the prompt, one per new token.
Run run_yours(const Model& m, const std::vector<int>& prompt, int steps) {
    const int V = m.config.vocab_size;
    KVCache cache = make_kv_cache(m, 1, int(prompt.size()) + steps);
    ex::Scratch s;
    Run run;
    const float* logits = nullptr;
    for (int i = 0; i < steps; i++) {
        PhaseTime& phase = i == 0 ? run.prefill : run.decode;
        s.clock.zero();
        const double t0 = now_ms();
        logits = i == 0 ? ex::forward(m, cache, 0, prompt, s) : ex::forward(m, cache, 0, {&run.ids.back(), 1}, s);
        phase.total_ms += now_ms() - t0;
        for (int p = 0; p < ex::kPieces; p++) phase.piece_ms[std::size_t(p)] += s.clock.ms[std::size_t(p)];
        run.logits.emplace_back(logits, logits + V);
        run.ids.push_back(argmax(logits, V));
    }
    return run;
}

// The engine's timeline spans (src/engine/model.cpp's laps.mark names) in
// this lab's pieces. "residual + norm" holds the attention residual's add too.
ex::Piece piece_of(const std::string& span) {
    static const std::map<std::string, ex::Piece> pieces = {
        {"norm", ex::Piece::norms},          {"residual + norm", ex::Piece::norms},
        {"qkv", ex::Piece::products},        {"attn_out", ex::Piece::products},
        {"logits", ex::Piece::products},     {"attention", ex::Piece::attention},
        {"mlp_in", ex::Piece::mlp},          {"activation", ex::Piece::mlp},
        {"mlp_out", ex::Piece::mlp}};
    auto it = pieces.find(span);
    return it == pieces.end() ? ex::Piece::other : it->second;  // embed, rope + kv write, residual
}

// Adds the layer-part spans of `tl` (categories product, attention, other) to `phase`.
void add_spans(const Timeline& tl, PhaseTime& phase) {
    for (const TimelineEvent& e : tl.events()) {
        const std::string category = e.category;
        if (e.kind != 'X' || (category != "product" && category != "attention" && category != "other")) continue;
        phase.piece_ms[std::size_t(piece_of(e.name.text))] += double(e.dur_ns) * 1e-6;
    }
}

// The same greedy run through the engine's prefill and decode, each call
// recorded on a timeline with layer detail.
Run run_engine(const Model& m, const std::vector<int>& prompt, int steps) {
    const int V = m.config.vocab_size;
    KVCache cache = make_kv_cache(m, 1, int(prompt.size()) + steps);
    RunState st = make_run_state(m.config, 1);
    Run run;
    int slot = 0;
    for (int i = 0; i < steps; i++) {
        PhaseTime& phase = i == 0 ? run.prefill : run.decode;
        Timeline tl(TimelineDetail::layers, std::size_t(m.config.n_layers) * 16 + 16);
        set_active_timeline(&tl);
        const double t0 = now_ms();
        const float* logits =
            i == 0 ? prefill(m, cache, st, 0, prompt) : decode(m, cache, st, {&slot, 1}, {&run.ids.back(), 1});
        phase.total_ms += now_ms() - t0;
        set_active_timeline(nullptr);
        add_spans(tl, phase);
        run.logits.emplace_back(logits, logits + V);
        run.ids.push_back(argmax(logits, V));
    }
    return run;
}

// How far two correct forwards' logits may be apart. f32: the tests' bound.
// Other precisions round x inside each product (to bf16, or to integers per
// group): the last-bit differences of the two sides' x can flip a rounding.
struct Tolerance {
    double atol, rtol;
};
Tolerance tolerance_for(Precision p) { return p == Precision::f32 ? Tolerance{1e-4, 1e-3} : Tolerance{1e-2, 1e-2}; }

// The first step whose token or logits differ, or -1. Prints what differs.
int first_divergence(const Run& yours, const Run& engine, Tolerance tol, json& js) {
    for (std::size_t i = 0; i < engine.ids.size(); i++) {
        const std::vector<float>& a = yours.logits[i];
        const std::vector<float>& b = engine.logits[i];
        std::size_t worst = 0;
        double worst_excess = -1;
        for (std::size_t j = 0; j < b.size(); j++) {
            const double excess = std::fabs(double(a[j]) - b[j]) - (tol.atol + tol.rtol * std::fabs(b[j]));
            if (!(excess <= worst_excess)) worst_excess = excess, worst = j;
        }
        if (yours.ids[i] != engine.ids[i] || !(worst_excess <= 0)) {
            std::printf("   first divergence: step %zu (%s): your token %d, the engine's %d; logit %zu is %g, the "
                        "engine's %g\n",
                        i, i == 0 ? "prefill" : "decode", yours.ids[i], engine.ids[i], worst, a[worst], b[worst]);
            js["first_divergence"] = {{"step", i}, {"yours", yours.ids[i]}, {"engine", engine.ids[i]}};
            return int(i);
        }
    }
    return -1;
}

// One phase's table: total time, then each piece's share, yours and the engine's.
json print_phase(const char* name, const PhaseTime& yours, const PhaseTime& engine, int calls) {
    std::printf("   %-32s %12s %12s\n", name, "yours", "engine");
    std::printf("   %-32s %9.3f ms %9.3f ms   (%d call%s)\n", "total", yours.total_ms, engine.total_ms, calls,
                calls == 1 ? "" : "s");
    json pieces = json::object();
    double marked_yours = 0, marked_engine = 0;
    for (int p = 0; p < ex::kPieces; p++) {
        const double y = yours.piece_ms[std::size_t(p)], e = engine.piece_ms[std::size_t(p)];
        marked_yours += y, marked_engine += e;
        std::printf("   %-32s %10.1f %% %10.1f %%\n", ex::kPieceNames[std::size_t(p)],
                    100 * y / std::max(yours.total_ms, 1e-9), 100 * e / std::max(engine.total_ms, 1e-9));
        pieces[ex::kPieceNames[std::size_t(p)]] = {{"yours_ms", y}, {"engine_ms", e}};
    }
    std::printf("   %-32s %10.1f %% %10.1f %%\n", "not marked (checks, calls, clock)",
                100 * (yours.total_ms - marked_yours) / std::max(yours.total_ms, 1e-9),
                100 * (engine.total_ms - marked_engine) / std::max(engine.total_ms, 1e-9));
    return {{"yours_ms", yours.total_ms}, {"engine_ms", engine.total_ms}, {"calls", calls}, {"pieces", pieces}};
}

int run(const Options& o) {
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (o.common.device != "cpu")
        fail("lab 15's forward runs on the CPU only (the engine's CUDA twin is not part of this lab): "
             "drop --device {}", o.common.device);
    cli::Session s = cli::load_session(o.common);
    const Model& m = *s.loaded.model;
    const Config& c = m.config;
    // Refused here too, not only by your forward: a starter stops at exit 3 before it could say so.
    const FamilyTraits& t = c.traits();
    if (t.norm != Norm::rmsnorm || t.positions != Positions::rotary || t.mlp != Mlp::swiglu)
        fail("lab 15 runs Llama-family models (RMSNorm, rotary, SwiGLU); {} is a {} model: try --model tiny",
             o.common.model, family_name(c.family));
    if (c.sliding_window > 0)
        fail("lab 15's attention has no sliding window; {} slides over {} positions: pick a model without one, "
             "e.g. --model tiny",
             o.common.model, c.sliding_window);
    const std::vector<int> prompt = s.loaded.tokenizer.encode(o.prompt);
    if (prompt.empty()) fail("--prompt is empty: give at least one character");
    if (long(prompt.size()) + o.steps > c.max_seq_len)
        fail("a prompt of {} tokens and {} steps exceed {}'s context of {}: shorten the prompt or lower --steps",
             prompt.size(), o.steps, o.common.model, c.max_seq_len);
    std::printf("Lab 15: your forward pass against the engine's (CPU)\n");
    std::printf("model %s: %d layers, dim %d, %d query heads, %d KV heads of %d, MLP %d, vocabulary %d\n",
                o.common.model.c_str(), c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim,
                c.vocab_size);
    std::printf("prompt: %zu tokens, %d greedy steps (1 prefill + %d decode calls)\n\n", prompt.size(), o.steps,
                o.steps - 1);

    // A first run of each, untimed: oneDNN builds its primitives, pages are touched.
    run_yours(m, prompt, o.steps);
    run_engine(m, prompt, o.steps);
    const Run yours = run_yours(m, prompt, o.steps);
    const Run engine = run_engine(m, prompt, o.steps);

    json js;
    std::printf("1. The same tokens, the same logits?\n");
    const Tolerance tol = tolerance_for(m.precision);
    const int diverged = first_divergence(yours, engine, tol, js);
    if (diverged < 0)
        std::printf("   every step's logits within %g + %g |engine|; the same %d tokens: \"%s\"\n", tol.atol, tol.rtol, o.steps,
                    lab::text_of(s.loaded.tokenizer, yours.ids).c_str());
    std::printf("\n2. Where the time goes (shares of each phase's total; the engine's from its timeline)\n");
    js["prefill"] = print_phase(fmt::format("prefill ({} rows)", prompt.size()).c_str(), yours.prefill,
                                engine.prefill, 1);
    std::printf("\n");
    js["decode"] = print_phase("decode (1 row a call)", yours.decode, engine.decode, o.steps - 1);
    std::printf("\n   The engine's norms include the attention residual's add (its span \"residual + norm\").\n"
                "   Its norms, rope, attention and activation run on every thread; yours on as many as you wrote.\n\n");
    js["model"] = o.common.model;
    js["prompt_tokens"] = prompt.size();
    js["generated_ids"] = yours.ids;
    js["same_tokens"] = yours.ids == engine.ids;
    js["ok"] = diverged < 0;
    lab::write_lab_json(o.common, js);
    return lab::finish(diverged < 0);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl{
        "Lab 15: the forward pass.\n"
        "Runs your forward (exercise.cpp: rms_norm, apply_rope, attend, swiglu_mlp, decoder_layer, forward)\n"
        "and the engine's on the same prompt, greedy: prints the first step whose token or logits differ,\n"
        "then, for the prefill (the prompt in one call) and the decode calls (one token each), both\n"
        "sides' time and the share of norms, products, attention, MLP and the rest. CPU only.\n"
        "Llama-family models only (RMSNorm, rotary, SwiGLU; no sliding window). Test your pieces with\n"
        "  meson test -C build --suite track4-15",
        "15-forward-pass"};
    cl.common(o.common);
    cl.option("--prompt,-p", o.prompt, "prompt text, run through both forwards").show_default();
    cl.option("--steps,-n", o.steps, "tokens generated greedily: 1 prefill call, then steps - 1 decode calls")
        .show_default();
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
